// What each op of a rank class does to tensors when the executor runs it, looked up from what the op says
// it is (kind, role, a GEMM's pass, the linear and tensor a TP collective serves). Pure CPU code: the
// executor's contract with the lowering.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/op_graph.hpp"
#include "executor/mla_steps.hpp"

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

struct OpBinding {
  Action action = Action::linear_forward;
  // The model part the op works on: the linear's role for GEMMs and TP collectives (qkv_projection,
  // attention_projection, fc1, fc2, output_projection, or embedding), the norm's role for norms, router,
  // expert_fc1 or expert_fc2 for an experts block's GEMMs, core_attention for attention with sinks (their weights).
  OpRole subject = OpRole::none;
  // The class's first op of an iteration writing this weight's gradient (a weight-gradient GEMM, a norm backward,
  // the embedding backward or an attention backward with sinks, per layer and subject): it stores the gradient
  // (the embedding's zeroes its table first: a step names only some rows), the later ones add to it, so the
  // gradient buffers need no zeroing per step.
  bool first_gradient = false;
  // The embedding backward that writes the learned positions' gradient first in an iteration: it zeroes it (the
  // tied output projection writes the table's gradient before it, and so holds first_gradient, but never the
  // positions'; until 2026-11-30 the positions' gradient was then never zeroed and summed over every step).
  bool first_position_gradient = false;
  // linear_weight_grad: a grad_accumulation op of the same linear, layer, micro-batch and chunk adds what this GEMM
  // writes, so it writes the weight's (and bias's) gradient to a tensor of its own. The accumulation op, not the GEMM,
  // is then the weight's writer, but never a first_gradient: it always adds (Megatron's main_grad.add_), into gradients
  // the step zeroes at its start, and a later writer of the weight (a tied table's embedding backward) adds after it.
  bool gradient_apart = false;
  // Action::mla_step's step (subject: the weight it reads or whose gradient it writes, else none).
  MlaStep mla_step = MlaStep::q_down;
};

std::string to_string(Action action);

// One binding per op, in op order. Throws std::invalid_argument naming the op for what the executor does
// not run (context parallelism's all-gather form, a userbuffers ring, LayerNorm). The backward
// strand of double strand binds as any backward: its ops say compute2, and the runtime gives that stream its
// own CUDA stream and scratch.
// With multi-latent attention (`mla`: the model's) the ops of each layer's attention block, its RoPE and attention
// among them, bind to the block's steps (Action::mla_step); without it an op of an mla_* role is refused.
// With tied embeddings the output projection's weight gradient goes into the embedding table's (or, on a stage
// without the embedding, the table's copy): it and the embedding backward share one first_gradient.
std::vector<OpBinding> bind_ops(const RankClass& rank_class, bool tied_embeddings = false, bool mla = false);

// The weight whose gradient a bound op writes, as first_gradient counts its writers: (layer, subject), the tied output
// projection's under the embedding's role (it writes the table's); none for an op that writes no weight gradient.
// The embedding backward's learned positions are (layer, OpRole::none), first_position_gradient's.
using GradientKey = std::pair<std::int32_t, OpRole>;
std::optional<GradientKey> gradient_key(const Op& op, const OpBinding& b, bool tied_embeddings);

}  // namespace twin::exec
