// What the executor does with an op (the actions an op binds to, executor/op_binding.hpp) and, for each action, a row:
// the kernel entry it launches and what it does to its unit's parameter buffers. Adding an action starts here:
// action_traits' switch has no default, so the compiler names it (and executor/gpu/dispatch.cpp's, which runs it).
#pragma once
#include <cstdint>
#include <optional>

#include "core/op_kinds.hpp"

namespace twin::exec {

enum class Action : std::uint8_t {
  embedding_forward, embedding_backward,
  norm_forward, norm_backward,
  linear_forward, linear_input_grad, linear_weight_grad,
  rope_forward, rope_backward,
  attention_forward, attention_backward,
  activation_forward, activation_backward,
  residual_forward, residual_backward,
  loss_forward, loss_reduce, loss_backward,
  gather_input,        // SP all-gather of a column-parallel linear's input (forward, or again for its wgrad)
  reduce_output,       // reduce-scatter (SP) / all-reduce of a row-parallel linear's or the embedding's output
  gather_output_grad,  // SP all-gather of a row-parallel linear's (or the embedding's) output gradient
  reduce_input_grad,   // reduce-scatter (SP) / all-reduce of a column-parallel linear's input gradient
  send_activation, recv_activation, send_gradient, recv_gradient,
  // A double-strand pass's transfer over stages: its forward strand's activation and its backward strand's
  // gradient (either may be absent), one grouped NCCL call.
  send_strands, recv_strands,
  grad_reduce, param_gather, embedding_grad_sync, grad_norm, optimizer_step,
  // An MoE layer's experts block (executor/gpu/moe_block.hpp).
  router_forward,            // router GEMM, softmax and top-k, the copies sorted by expert
  routing_counts_reduce,     // under SP: the copies per expert summed over TP (the load-balancing loss's counts)
  router_input_grad, router_weight_grad,
  expert_dispatch, expert_dispatch_backward,  // token rows into expert order, and the gradient back
  expert_forward, expert_input_grad, expert_weight_grad,  // the experts' grouped GEMMs
  expert_activation_forward, expert_activation_backward,
  expert_combine, expert_combine_backward,    // weighted sum of each token's copies, and its gradient
  // Expert parallelism's all-to-alls (executor/gpu/moe_block.hpp): the routed copies to the EP ranks that
  // hold their experts and back; backward, their gradients the other way.
  dispatch_exchange, combine_exchange, dispatch_exchange_backward, combine_exchange_backward,
  // Context parallelism's ring (executor/gpu/context_ring_run.hpp): a block of ring attention (Op::ring_step
  // says which), and the ring's exchange of key-value blocks (backward: and of their gradients).
  ring_attention_forward, ring_attention_backward, ring_exchange, ring_exchange_backward,
  ring_merge,          // a forward block folded into the running output (by log-sum-exp)
  ring_gradient_add,   // backward: this rank's share of a key-value gradient added to the one that arrived
  // A Ulysses layer's all-to-alls (executor/gpu/ulysses_exchange.cpp): a tensor from the sequence layout (this
  // GPU's rows, every head) to the heads layout (the group's rows, this GPU's heads), and back.
  ulysses_to_heads, ulysses_to_sequence,
  // Hot switching's zero-byte message ordering a GPU's phase after the one before: nothing to run, the
  // process issues its phases one after another.
  phase_handoff,
  // Hot switching's re-sharding transfers between layouts: the runtime runs the whole switch as one step before
  // the part's first op (executor/gpu/resharding_run.hpp), so each transfer op only marks its place.
  switch_transfer,
  // An asymmetric plan's gradient ring across pipelines (Transfer::pipelines_*): its first send reduces the
  // segment's gradients over the pipelines (executor/pipeline_reduction.hpp, NCCL all-reduces, or under ZeRO-1
  // reduce-scatters, over the GPUs that hold the same elements); under ZeRO-1 the first send of its all-gather half
  // gathers the updated weights; the ring's other steps only mark their place.
  pipelines_reduce, pipelines_gather, pipelines_ring_step,
  // An FP8 layer's cast (executor/gpu/fp8_linears.hpp): a linear's input or output gradient (Op::linear and
  // Op::linear_tensor say which), or, after the optimizer step, every FP8 weight of the stage. The linear's GEMMs
  // keep their actions (linear_forward, ...); their GemmShape::inputs says they read the FP8 copies.
  fp8_cast,
  // FP8 delayed scaling's amax all-reduce (max) over the amax group (the stage's TP x CP x DP GPUs) and the scale
  // update of every state it reduced (executor/gpu/fp8_linears.hpp), after a forward or a backward.
  fp8_amax_reduce,
  // FP8 current scaling under SP: the amax of a tensor SP then gathers in FP8 (Op::linear and Op::linear_tensor say
  // which, its rows and columns the local ones), all-reduced (max) over the TP group before the cast scales by it
  // (executor/gpu/fp8_linears.hpp). The gathers themselves keep their actions (gather_input, gather_output_grad);
  // Op::fp8_payload says they move FP8.
  fp8_gathered_amax,
  // The transpose of an FP8 tensor's gathered rows into the columnwise copy wgrad reads (an fp8_transpose op: Op::linear
  // and Op::linear_tensor say which), after the SP gather that moved its rowwise copy (executor/gpu/fp8_gathers.cpp).
  fp8_transpose,
  // A step of a multi-latent attention layer's block (executor/gpu/mla_block.hpp; OpBinding::mla_step says which):
  // its projections' products, its latents' norms and copy, its RoPE, expansion and attention.
  mla_step,
  // Without gradient accumulation fusion: a linear's weight gradient, which its GEMM wrote apart
  // (OpBinding::gradient_apart), added to the weight's gradient (Megatron's main_grad.add_ hook).
  grad_accumulation,
};

// What an action does to the parameter buffers of its unit (executor/weight_residency.cpp: the windows in which a
// sharded plan's gathered weights stay and its gradients are written before their reduction).
enum class ParameterTouch : std::uint8_t { nothing, reads, writes, reads_and_writes, gathers, reduces, mla };

struct ActionTraits {
  // The kernel entry (gpu/op_kernels.hpp, one per op kind calibration times as a kernel of twin's own) the action
  // launches: the op kind whose entry it is, or none where the action runs GEMMs (cuBLASLt, timed by the GEMM grid),
  // NCCL calls (timed by the collective sweeps) or kernels no op kind's bench times: the router's softmax, top-k and
  // sort (its op is a GEMM's), a ring's blocks and merges (its attention ops are timed as whole-sequence attention of
  // their shape), an MLA block's steps (they launch the norm, RoPE and attention entries themselves beside GEMMs,
  // copies and the heads' expansion: executor/gpu/mla_attention.cpp). tests/executor/kernel_entry_test.cpp holds it
  // against core/op_kinds.hpp and the lowered graphs; the interpreter refuses an op whose kind is not its action's
  // entry (executor/gpu/kernel_launch.hpp).
  std::optional<OpKind> kernel_entry;
  // No parameter buffer for activations, collectives of activations and transfers. The optimizer's ops read the
  // shards (embedding_grad_sync, grad_norm, optimizer_step); an FP8 plan keeps its buffers whole
  // (executor/fp8_plan_check.cpp) and the reductions across pipelines run at ZeRO 0 and 1 only
  // (strategies/heterogeneous). norm_backward reads the norm's weight and writes its gradient.
  ParameterTouch parameters;
};

constexpr ActionTraits action_traits(Action action) {
  constexpr std::optional<OpKind> none = std::nullopt;
  using K = OpKind;
  using T = ParameterTouch;
  switch (action) {
    case Action::embedding_forward: return {K::embedding_forward, T::reads};
    case Action::embedding_backward: return {K::embedding_backward, T::writes};
    case Action::norm_forward: return {K::norm_forward, T::reads};
    case Action::norm_backward: return {K::norm_backward, T::reads_and_writes};
    case Action::linear_forward: return {none, T::reads};
    case Action::linear_input_grad: return {none, T::reads};
    case Action::linear_weight_grad: return {none, T::writes};
    case Action::rope_forward: return {K::rope_forward, T::nothing};
    case Action::rope_backward: return {K::rope_backward, T::nothing};
    case Action::attention_forward: return {K::attention_forward, T::nothing};
    case Action::attention_backward: return {K::attention_backward, T::nothing};
    case Action::activation_forward: return {K::activation_forward, T::nothing};
    case Action::activation_backward: return {K::activation_backward, T::nothing};
    case Action::residual_forward: return {K::elementwise, T::nothing};
    case Action::residual_backward: return {K::elementwise, T::nothing};
    case Action::loss_forward: return {K::loss_forward, T::nothing};
    case Action::loss_reduce: return {none, T::nothing};
    case Action::loss_backward: return {K::loss_backward, T::nothing};
    case Action::gather_input: return {none, T::nothing};
    case Action::reduce_output: return {none, T::nothing};
    case Action::gather_output_grad: return {none, T::nothing};
    case Action::reduce_input_grad: return {none, T::nothing};
    case Action::send_activation: return {none, T::nothing};
    case Action::recv_activation: return {none, T::nothing};
    case Action::send_gradient: return {none, T::nothing};
    case Action::recv_gradient: return {none, T::nothing};
    case Action::send_strands: return {none, T::nothing};
    case Action::recv_strands: return {none, T::nothing};
    case Action::grad_reduce: return {none, T::reduces};
    case Action::param_gather: return {none, T::gathers};
    case Action::embedding_grad_sync: return {none, T::nothing};
    case Action::grad_norm: return {none, T::nothing};
    case Action::optimizer_step: return {K::optimizer_step, T::nothing};
    case Action::router_forward: return {none, T::reads};
    case Action::routing_counts_reduce: return {none, T::nothing};
    case Action::router_input_grad: return {none, T::reads};
    case Action::router_weight_grad: return {none, T::writes};
    case Action::expert_dispatch: return {K::moe_permute, T::nothing};
    case Action::expert_dispatch_backward: return {K::moe_permute, T::nothing};
    case Action::expert_forward: return {none, T::reads};
    case Action::expert_input_grad: return {none, T::reads};
    case Action::expert_weight_grad: return {none, T::writes};
    case Action::expert_activation_forward: return {K::activation_forward, T::nothing};
    case Action::expert_activation_backward: return {K::activation_backward, T::nothing};
    case Action::expert_combine: return {K::moe_unpermute, T::nothing};
    case Action::expert_combine_backward: return {K::moe_unpermute, T::nothing};
    case Action::dispatch_exchange: return {none, T::nothing};
    case Action::combine_exchange: return {none, T::nothing};
    case Action::dispatch_exchange_backward: return {none, T::nothing};
    case Action::combine_exchange_backward: return {none, T::nothing};
    case Action::ring_attention_forward: return {none, T::nothing};
    case Action::ring_attention_backward: return {none, T::nothing};
    case Action::ring_exchange: return {none, T::nothing};
    case Action::ring_exchange_backward: return {none, T::nothing};
    case Action::ring_merge: return {none, T::nothing};
    case Action::ring_gradient_add: return {K::elementwise, T::nothing};
    case Action::ulysses_to_heads: return {none, T::nothing};
    case Action::ulysses_to_sequence: return {none, T::nothing};
    case Action::phase_handoff: return {none, T::nothing};
    case Action::switch_transfer: return {none, T::nothing};
    case Action::pipelines_reduce: return {none, T::nothing};
    case Action::pipelines_gather: return {none, T::nothing};
    case Action::pipelines_ring_step: return {none, T::nothing};
    case Action::fp8_cast: return {K::fp8_cast, T::nothing};
    case Action::fp8_amax_reduce: return {none, T::nothing};
    case Action::fp8_gathered_amax: return {none, T::nothing};
    case Action::fp8_transpose: return {K::fp8_transpose, T::nothing};
    case Action::mla_step: return {none, T::mla};
    case Action::grad_accumulation: return {K::elementwise, T::writes};
  }
  return {none, T::nothing};
}

constexpr std::optional<OpKind> kernel_entry(Action action) { return action_traits(action).kernel_entry; }

}  // namespace twin::exec
