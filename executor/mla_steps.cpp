// The order is MlaAttention's (executor/gpu/mla_attention.cpp) and the lowering's (strategies/lowering_mla.cpp):
// queries, then keys and values, RoPE, the expansion and attention forward; backward the other way round, each
// linear's input gradient before its weight's (strategies/lowering_linears.cpp's column_parallel_backward).
#include "executor/mla_steps.hpp"

#include <array>

namespace twin::exec {
namespace {

using enum MlaStep;

constexpr std::array kForwardLatent{q_down, q_norm, q_up, kv_down, kv_latent_copy, kv_norm, kv_up, rope, expand,
                                    attention};
constexpr std::array kForwardDirect{q_up, kv_down, kv_latent_copy, kv_norm, kv_up, rope, expand, attention};
constexpr std::array kBackwardLatent{attention_backward, expand_backward, rope_backward, kv_up_input_grad,
                                     kv_up_weight_grad, kv_norm_backward, kv_latent_copy_backward,
                                     kv_down_input_grad, kv_down_weight_grad, q_up_input_grad, q_up_weight_grad,
                                     q_norm_backward, q_down_input_grad, q_down_weight_grad};
constexpr std::array kBackwardDirect{attention_backward, expand_backward, rope_backward, kv_up_input_grad,
                                     kv_up_weight_grad, kv_norm_backward, kv_latent_copy_backward,
                                     kv_down_input_grad, kv_down_weight_grad, q_up_input_grad, q_up_weight_grad};

// A projection's GEMM: forward, input gradient or weight gradient, as the op's pass says.
std::optional<MlaStep> linear_step(const Op& op, MlaStep forward, MlaStep input_grad, MlaStep weight_grad) {
  switch (op.gemm_pass) {
    case GemmPass::forward: return forward;
    case GemmPass::input_gradient: return input_grad;
    case GemmPass::weight_gradient: return weight_grad;
    case GemmPass::none: break;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(MlaStep step) {
  static constexpr std::array<std::string_view, static_cast<int>(q_down_weight_grad) + 1> names{
      "q_down", "q_norm", "q_up", "kv_down", "kv_latent_copy", "kv_norm", "kv_up", "rope", "expand", "attention",
      "attention_backward", "expand_backward", "rope_backward", "kv_up_input_grad", "kv_up_weight_grad",
      "kv_norm_backward", "kv_latent_copy_backward", "kv_down_input_grad", "kv_down_weight_grad", "q_up_input_grad",
      "q_up_weight_grad", "q_norm_backward", "q_down_input_grad", "q_down_weight_grad"};
  return names[static_cast<int>(step)];
}

std::span<const MlaStep> mla_steps(bool backward, bool query_latent) {
  if (backward) return query_latent ? std::span<const MlaStep>(kBackwardLatent) : kBackwardDirect;
  return query_latent ? std::span<const MlaStep>(kForwardLatent) : kForwardDirect;
}

std::optional<MlaStep> mla_step_of(const Op& op) {
  // A forward op recomputed in a backward pass (recompute) is its forward step again.
  const bool backward = op.phase == Phase::backward && !op.recomputed;
  if (op.kind == OpKind::rope_forward) return rope;
  if (op.kind == OpKind::rope_backward) return rope_backward;
  if (op.kind == OpKind::attention_forward) return attention;  // also a recomputed one in a backward pass
  if (op.kind == OpKind::attention_backward) return attention_backward;
  if (op.kind == OpKind::gemm) {
    if (op.role == OpRole::mla_q_down) return linear_step(op, q_down, q_down_input_grad, q_down_weight_grad);
    if (op.role == OpRole::mla_q_up) return linear_step(op, q_up, q_up_input_grad, q_up_weight_grad);
    if (op.role == OpRole::mla_kv_down) return linear_step(op, kv_down, kv_down_input_grad, kv_down_weight_grad);
    if (op.role == OpRole::mla_kv_up) return linear_step(op, kv_up, kv_up_input_grad, kv_up_weight_grad);
    return std::nullopt;
  }
  if (op.kind == OpKind::norm_forward || op.kind == OpKind::norm_backward) {
    const bool norm_backward = op.kind == OpKind::norm_backward;
    if (op.role == OpRole::mla_q_norm) return norm_backward ? q_norm_backward : q_norm;
    if (op.role == OpRole::mla_kv_norm) return norm_backward ? kv_norm_backward : kv_norm;
    return std::nullopt;
  }
  if (op.kind != OpKind::elementwise) return std::nullopt;
  // The kv latent's copy out of the down projection's rows (and its gradient into them) is its norm's.
  if (op.role == OpRole::mla_kv_norm) return backward ? kv_latent_copy_backward : kv_latent_copy;
  if (op.role == OpRole::mla_kv_expand) return backward ? expand_backward : expand;
  return std::nullopt;
}

bool writes_weight_gradient(MlaStep step) {
  return step == kv_up_weight_grad || step == kv_norm_backward || step == kv_down_weight_grad ||
         step == q_up_weight_grad || step == q_norm_backward || step == q_down_weight_grad;
}

}  // namespace twin::exec
