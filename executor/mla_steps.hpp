// Multi-latent attention's steps as twin execute runs them (executor/gpu/mla_attention.hpp, one call per step) and
// as the lowering emits them (strategies/lowering_mla.cpp, one op per step): the list of each pass, in order, and the
// step an op of an MLA layer is. Pure CPU code: tests/executor/mla_binding_test.cpp walks a lowered MLA plan through
// it, op for op.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/op.hpp"

namespace twin::exec {

enum class MlaStep : std::uint8_t {
  // Forward.
  q_down, q_norm, q_up,                  // the query latent, its norm, the up projection (q_up alone: direct)
  kv_down, kv_latent_copy, kv_norm, kv_up,  // the kv latent and shared key, the latent out of their rows, ...
  rope, expand, attention,               // RoPE on the rope parts, the per-head keys and values, attention
  // Backward.
  attention_backward, expand_backward, rope_backward,
  kv_up_input_grad, kv_up_weight_grad, kv_norm_backward, kv_latent_copy_backward, kv_down_input_grad,
  kv_down_weight_grad,
  q_up_input_grad, q_up_weight_grad, q_norm_backward, q_down_input_grad, q_down_weight_grad,
};
std::string_view to_string(MlaStep step);
// Whether the step is of the backward pass (attention_backward on).
constexpr bool is_backward(MlaStep step) {
  return static_cast<int>(step) >= static_cast<int>(MlaStep::attention_backward);
}

// The steps of a forward or backward pass, with the query latent (q_lora_rank > 0) or the direct query projection.
std::span<const MlaStep> mla_steps(bool backward, bool query_latent);

// The step an op of an MLA layer is: its mla_* role (a GEMM by its pass, a norm by its kind, the latent's copy and
// the expansion by their phase), or for RoPE and attention their kind. Nothing for an op of none of these.
std::optional<MlaStep> mla_step_of(const Op& op);

// Whether the step writes a weight's gradient (its first in a step stores it, later ones add), and which weight.
bool writes_weight_gradient(MlaStep step);

}  // namespace twin::exec
