#include "executor/kernel_entry.hpp"

namespace twin::exec {

std::optional<OpKind> kernel_entry(Action action) {
  switch (action) {
    case Action::embedding_forward: return OpKind::embedding_forward;
    case Action::embedding_backward: return OpKind::embedding_backward;
    case Action::norm_forward: return OpKind::norm_forward;
    case Action::norm_backward: return OpKind::norm_backward;
    case Action::rope_forward: return OpKind::rope_forward;
    case Action::rope_backward: return OpKind::rope_backward;
    case Action::attention_forward: return OpKind::attention_forward;
    case Action::attention_backward: return OpKind::attention_backward;
    case Action::activation_forward:
    case Action::expert_activation_forward: return OpKind::activation_forward;
    case Action::activation_backward:
    case Action::expert_activation_backward: return OpKind::activation_backward;
    case Action::residual_forward:
    case Action::residual_backward:
    case Action::ring_gradient_add:
    case Action::grad_accumulation: return OpKind::elementwise;
    case Action::loss_forward: return OpKind::loss_forward;
    case Action::loss_backward: return OpKind::loss_backward;
    case Action::optimizer_step: return OpKind::optimizer_step;
    case Action::fp8_cast: return OpKind::fp8_cast;
    case Action::fp8_transpose: return OpKind::fp8_transpose;
    case Action::expert_dispatch:
    case Action::expert_dispatch_backward: return OpKind::moe_permute;
    case Action::expert_combine:
    case Action::expert_combine_backward: return OpKind::moe_unpermute;
    // GEMMs (cuBLASLt, timed by the GEMM grid), NCCL calls (timed by the collective sweeps), and kernels no kind's
    // bench times: the router's softmax, top-k and sort (its op is a GEMM's), a ring's blocks and merges (its
    // attention ops are timed as whole-sequence attention of their shape).
    case Action::linear_forward:
    case Action::linear_input_grad:
    case Action::linear_weight_grad:
    case Action::loss_reduce:
    case Action::gather_input:
    case Action::reduce_output:
    case Action::gather_output_grad:
    case Action::reduce_input_grad:
    case Action::send_activation:
    case Action::recv_activation:
    case Action::send_gradient:
    case Action::recv_gradient:
    case Action::send_strands:
    case Action::recv_strands:
    case Action::grad_reduce:
    case Action::param_gather:
    case Action::embedding_grad_sync:
    case Action::grad_norm:
    case Action::fp8_amax_reduce:
    case Action::fp8_gathered_amax:
    case Action::router_forward:
    case Action::routing_counts_reduce:
    case Action::router_input_grad:
    case Action::router_weight_grad:
    case Action::expert_forward:
    case Action::expert_input_grad:
    case Action::expert_weight_grad:
    case Action::dispatch_exchange:
    case Action::combine_exchange:
    case Action::dispatch_exchange_backward:
    case Action::combine_exchange_backward:
    case Action::ring_attention_forward:
    case Action::ring_attention_backward:
    case Action::ring_exchange:
    case Action::ring_exchange_backward:
    case Action::ring_merge:
    case Action::ulysses_to_heads:
    case Action::ulysses_to_sequence:
    case Action::phase_handoff:
    case Action::switch_transfer:
    case Action::pipelines_reduce:
    case Action::pipelines_gather:
    case Action::pipelines_ring_step:
    // An MLA block's steps launch the norm, RoPE and attention entries themselves (executor/gpu/mla_attention.cpp),
    // beside GEMMs, copies and the heads' expansion: no one entry.
    case Action::mla_step: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace twin::exec
