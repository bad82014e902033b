#include "sim/price_cache.hpp"

#include <cstring>

namespace twin::sim {

static_assert(sizeof(Op) == 192, "Op changed: make price_key() cover any new field that can affect a price");

PriceKey price_key(const Op& op) {
  std::int64_t flops_bits = 0;
  std::memcpy(&flops_bits, &op.flops, sizeof flops_bits);
  const GemmShape& g = op.gemm;
  const AttentionShape& a = op.attention;
  return {static_cast<std::int64_t>(op.kind), static_cast<std::int64_t>(op.role), static_cast<std::int64_t>(op.phase),
          op.recomputed, g.m, g.n, g.k, g.count, g.transpose_a, g.transpose_b, g.split, g.busiest,
          a.batch, a.heads, a.kv_heads, a.seq_q, a.seq_kv, a.head_dim, a.causal, a.flash, a.dropout, a.cudnn,
          op.rows, op.cols, op.gated_activation, op.fuses_residual, op.elements, op.bytes, flops_bits,
          static_cast<std::int64_t>(op.optimizer_precision.main_params) << 16 |
              static_cast<std::int64_t>(op.optimizer_precision.exp_avg) << 8 |
              static_cast<std::int64_t>(op.optimizer_precision.exp_avg_sq)};
}

TimeNs PriceCache::get_or_compute(const GpuSpec& gpu, const PriceKey& key, const std::function<TimeNs()>& compute) {
  {
    std::lock_guard lock(mutex_);
    if (auto found = prices_.find({&gpu, key}); found != prices_.end()) return found->second;
  }
  const TimeNs price = compute();  // outside the lock: pricing a GEMM scans the profile's measured shapes
  std::lock_guard lock(mutex_);
  return prices_.try_emplace({&gpu, key}, price).first->second;
}

}  // namespace twin::sim
