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
#include "executor/action.hpp"
#include "executor/mla_steps.hpp"

namespace twin::exec {

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
