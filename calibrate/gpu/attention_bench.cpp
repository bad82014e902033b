// Attention ops timed as the executor runs them: fused through its default implementation (cuDNN's), one handle and
// plan cache for every bench alive; unfused as Megatron-LM's kernels (gpu/unfused_attention.hpp), one cuBLASLt handle
// likewise. A backward bench runs its forward once first, for the statistics or scores it reads.
#include <memory>
#include <utility>

#include "calibrate/gpu/bench_builder.hpp"
#include "gpu/attention.hpp"
#include "gpu/op_kernels.hpp"
#include "gpu/unfused_attention.hpp"

namespace twin::gpu {
namespace {

namespace k = twin::kernels;
using B = k::bf16;

template <class T, class... Args>
std::shared_ptr<T> shared_instance(std::weak_ptr<T>& alive, Args&&... args) {
  std::shared_ptr<T> instance = alive.lock();
  if (!instance) alive = instance = std::make_shared<T>(std::forward<Args>(args)...);
  return instance;
}

std::shared_ptr<Attention> shared_attention() {
  static std::weak_ptr<Attention> alive;
  return shared_instance(alive, kDefaultAttentionImplementation);
}

std::shared_ptr<UnfusedAttention> shared_unfused_attention() {
  static std::weak_ptr<UnfusedAttention> alive;
  return shared_instance(alive);
}

// The shapes the executor's attention runs, or why not.
bool attention_shape_runs(const AttentionShape& a, const KernelModelFacts& facts, std::string& why_not) {
  // The head dims the executor's attention runs (gpu/attention.hpp): cuDNN's, multiples of 8 up to 256 (Gemma's
  // 256, Phi-3's 96, MLA's d_qk 192 with d_v 128); twin's own kernels, 64 and 128.
  const bool cudnn = kDefaultAttentionImplementation != AttentionImplementation::kernels;
  const auto head_dim_ok = [cudnn](std::int64_t d) { return cudnn ? d > 0 && d % 8 == 0 && d <= 256 : d == 64 || d == 128; };
  if (a.seq_q != a.seq_kv || !head_dim_ok(a.head_dim) || !head_dim_ok(value_head_dim(a)) || a.kv_heads <= 0 ||
      a.heads % a.kv_heads) {
    why_not = cudnn ? "attention kernels need seq_q == seq_kv, head dims that are multiples of 8 up to 256 and "
                      "kv_heads dividing heads"
                    : "attention kernels need seq_q == seq_kv, head_dim 64 or 128 and kv_heads dividing heads";
    return false;
  }
  if (a.softcapped && facts.attention_softcap <= 0) {
    why_not = "no cap for soft-capped scores";
    return false;
  }
  if (!a.flash && (a.window > 0 || a.softcapped || a.sinks || !a.causal || a.seq_q % 8 != 0 ||
                   value_head_dim(a) != a.head_dim)) {
    why_not = "unfused attention runs causal scores of a sequence that is a multiple of 8, without windows, caps or "
              "sinks, its values as wide as its keys";
    return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<void> hold_shared_attention() {
  return std::make_shared<std::pair<std::shared_ptr<Attention>, std::shared_ptr<UnfusedAttention>>>(
      shared_attention(), shared_unfused_attention());
}

std::optional<KernelBench> attention_bench(Builder& x, const Op& op, const KernelModelFacts& facts,
                                           std::string& why_not) {
  const AttentionShape& a = op.attention;
  if (!attention_shape_runs(a, facts, why_not)) return std::nullopt;
  // the executor's too (executor/gpu/dense_block.hpp)
  const k::AttentionDims dims = attention_dims(a, facts.attention_softcap);
  const std::int64_t tokens = a.batch * a.seq_q, qn = tokens * a.heads * a.head_dim, kvn = tokens * a.kv_heads * a.head_dim;
  const std::int64_t vn = tokens * a.kv_heads * value_head_dim(a), on = tokens * a.heads * value_head_dim(a);
  B *q = x.b(x.bf16(qn)), *kp = x.b(x.bf16(kvn)), *v = x.b(x.bf16(vn)), *o = x.b(x.raw(on * 2));
  float* lse = x.f(x.raw(a.batch * a.heads * a.seq_q * 4));
  // Sinks (gpt-oss's): one logit per head folded in after the plain attention, timed with it as the op runs.
  const B* sinks = a.sinks ? x.b(x.bf16(a.heads)) : nullptr;
  std::shared_ptr<Attention> attention = shared_attention();
  AttentionForward forward{attention.get(), q, kp, v, o, lse, dims, {}, sinks};
  std::shared_ptr<void> keep = attention;
  if (!a.flash) {  // its dropout kernel where the op has one (calibration times fused attention without)
    const std::shared_ptr<UnfusedAttention> unfused = shared_unfused_attention();
    forward.dropout = {a.dropout ? (op.dropout > 0 ? op.dropout : 0.1f) : 0.f, static_cast<std::int64_t>(x.seed)};
    forward.unfused = unfused.get();
    forward.scores = unfused_scores_in(x.v(x.raw(unfused_scores_bytes(dims, a.dropout))), dims, a.dropout);
    keep = unfused;
  }
  if (op.kind == OpKind::attention_forward) return bench_of(x, forward, keep);
  launch(forward, x.stream);  // O and the logsumexp, or the scores, the backward reads
  B *dout = x.b(x.bf16(on)), *dq = x.b(x.raw(qn * 2)), *dk = x.b(x.raw(kvn * 2)), *dv = x.b(x.raw(vn * 2));
  B* d_sinks = a.sinks ? x.b(x.raw(a.heads * 2)) : nullptr;
  AttentionBackward backward{attention.get(), q, kp, v, o, dout, lse, dq, dk, dv, dims, forward.dropout, sinks, d_sinks};
  backward.unfused = forward.unfused;
  backward.scores = forward.scores;
  return bench_of(x, backward, keep);
}

}  // namespace twin::gpu
