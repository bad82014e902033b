#include "sim/price_cache.hpp"

#include <cstring>

namespace twin::sim {

// No price depends on what a send or receive moves (transfer, strands), on ring_segment, context_form or on host_ns
// and dispatch_ns (the host's time before the op, not its kernel's): price_key() leaves them out. The norm variant
// is in it: a profile measures LayerNorm's kernels apart from RMSNorm's (cost/shape_space.cpp).
static_assert(sizeof(Op) == 248, "Op changed: make price_key() cover any new field that can affect a price");

namespace {

// An op's enums (8 bits each; the optimizer state's dtypes 4, the activation and the GEMM's inputs 3, the FP8 recipe
// 2, the GEMM's output 2) and flags (1 bit each) in one word: 63 bits.
std::int64_t kind_and_flags(const Op& op) {
  const GemmShape& g = op.gemm;
  const AttentionShape& a = op.attention;
  const OptimizerPrecision& precision = op.optimizer_precision;
  std::uint64_t word = 0;
  int bit = 0;
  const auto put = [&](std::uint64_t value, int bits) {
    word |= value << bit;
    bit += bits;
  };
  for (std::uint8_t e : {static_cast<std::uint8_t>(op.kind), static_cast<std::uint8_t>(op.role),
                         static_cast<std::uint8_t>(op.phase)})
    put(e, 8);
  static_assert(static_cast<int>(StateDtype::fp8) < 16, "a state dtype in 4 bits");
  for (StateDtype dtype : {precision.main_params, precision.exp_avg, precision.exp_avg_sq})
    put(static_cast<std::uint8_t>(dtype), 4);
  static_assert(static_cast<int>(GemmInputs::fp8_blockwise_1d) < 8, "a GEMM's inputs in 3 bits");
  put(static_cast<std::uint8_t>(g.inputs), 3);        // five values (2 bits until the weight gradient's block-wise)
  put(static_cast<std::uint8_t>(op.fp8_recipe), 2);   // four values
  static_assert(static_cast<int>(Activation::quick_geglu) < 8, "an activation in 3 bits");
  put(static_cast<std::uint8_t>(op.activation), 3);   // five values (2 bits until quick GeGLU, a fifth, overflowed)
  static_assert(static_cast<int>(GemmOutput::added_fp32) < 4, "a GEMM's output in 2 bits");
  put(static_cast<std::uint8_t>(op.gemm_output), 2);  // four values
  for (bool flag : {op.recomputed, g.transpose_a, g.transpose_b, a.causal, a.flash, a.dropout, a.cudnn, a.packed,
                    a.softcapped, a.sinks, op.softcapped_logits, op.unfused_loss, op.fuses_residual, g.e5m2, op.fp8_columnwise,
                    precision.store_param_remainders, op.normalization == Normalization::layernorm})
    put(flag, 1);
  return static_cast<std::int64_t>(word);
}

// Two 32-bit counts in one word.
std::int64_t pair_of(std::int32_t high, std::int32_t low) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(static_cast<std::uint32_t>(high)) << 32 |
                                   static_cast<std::uint32_t>(low));
}

// The dropout probability's bits (a kernel variant: the elementwise and embedding keys name it).
std::int32_t dropout_bits(float dropout) {
  std::int32_t bits = 0;
  std::memcpy(&bits, &dropout, sizeof bits);
  return bits;
}

}  // namespace

PriceKey price_key(const Op& op) {
  std::int64_t flops_bits = 0;
  std::memcpy(&flops_bits, &op.flops, sizeof flops_bits);
  const GemmShape& g = op.gemm;
  const AttentionShape& a = op.attention;
  return {kind_and_flags(op), g.m, g.n, g.k, pair_of(g.count, g.split), g.busiest,
          a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_kv,
          pair_of(static_cast<std::int32_t>(a.head_dim), a.v_head_dim), a.window,
          op.rows, op.cols, op.elements, op.bytes, flops_bits, pair_of(op.main_gradient_bytes, dropout_bits(op.dropout))};
}

std::size_t PriceKeyHash::operator()(const PriceKey& key) const {
  // Independent products (the loop vectorises; a multiply chain like FNV's waits on itself), then a final mix.
  std::uint64_t hash = 0;
  std::uint64_t factor = 0x9e3779b97f4a7c15ULL;
  for (std::int64_t word : key) {
    hash += static_cast<std::uint64_t>(word) * factor;
    factor += 0xbf58476d1ce4e5b9ULL;
  }
  return static_cast<std::size_t>((hash ^ (hash >> 31)) * 0x94d049bb133111ebULL);
}

void PriceMemo::place(const Slot& slot) {
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = slot.tag & mask;
  while (slots_[i].tag != 0) i = (i + 1) & mask;
  slots_[i] = slot;
}

void PriceMemo::insert(const PriceKey& key, std::size_t hash, TimeNs price) {
  if (2 * (used_ + 1) > slots_.size()) {  // grow to keep probes short
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    for (const Slot& slot : old)
      if (slot.tag != 0) place(slot);
  }
  place({tag_of(hash), price, key});
  ++used_;
}

std::size_t PriceCache::GpuPriceKeyHash::operator()(const std::pair<PricedOn, PriceKey>& key) const {
  const std::size_t on = std::hash<const GpuSpec*>{}(key.first.gpu) ^ std::hash<double>{}(key.first.step_clock.sm_MHz) ^
                         (std::hash<double>{}(key.first.step_clock.gemm_MHz) << 1);
  return PriceKeyHash{}(key.second) ^ (on * 0x9e3779b97f4a7c15ULL);
}

TimeNs PriceCache::get_or_compute(const PricedOn& on, const PriceKey& key, const std::function<TimeNs()>& compute) {
  {
    std::lock_guard lock(mutex_);
    if (auto found = prices_.find({on, key}); found != prices_.end()) return found->second;
  }
  const TimeNs price = compute();  // outside the lock: pricing a GEMM scans the profile's measured shapes
  std::lock_guard lock(mutex_);
  return prices_.try_emplace({on, key}, price).first->second;
}

PriceMemo& PriceCache::memo_of_this_thread(const PricedOn& on) {
  std::lock_guard lock(mutex_);
  std::unique_ptr<PriceMemo>& memo = memos_[{std::this_thread::get_id(), on}];
  if (!memo) memo = std::make_unique<PriceMemo>();
  return *memo;
}

}  // namespace twin::sim
