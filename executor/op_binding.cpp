// Binding is a lookup: every op says what it is where the lowering makes it (a GEMM its pass and weight,
// a TP collective the linear and tensor it serves: core/op.hpp), so what an op does depends on nothing but
// the op. Order decides only which op writes a weight's gradient first in a step (first_gradient).
#include "executor/op_binding.hpp"

#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/op_kinds.hpp"

namespace twin::exec {
namespace {

[[noreturn]] void unsupported(const RankClass& rc, OpIndex index, const char* what) {
  throw std::invalid_argument(fmt::format("executor: op {} ({}) is {}, which twin execute does not run yet",
                                          op_id(rc.index, index), op_name(rc.op(index)), what));
}

Action gemm_action(const RankClass& rc, OpIndex index) {
  switch (rc.op(index).gemm_pass) {
    case GemmPass::forward: return Action::linear_forward;
    case GemmPass::input_gradient: return Action::linear_input_grad;
    case GemmPass::weight_gradient: return Action::linear_weight_grad;
    case GemmPass::none: break;
  }
  unsupported(rc, index, "a GEMM that does not say which product of its linear it computes");
}

// The GEMMs of an experts block: the router's backward products (its forward is the moe_router op) and the
// experts' grouped products.
Action moe_gemm_action(const RankClass& rc, OpIndex index) {
  const Op& op = rc.op(index);
  if (op.role == OpRole::router) {  // grouped or forward: the moe_router op is the router's forward
    if (op.gemm.count == 1 && op.gemm_pass == GemmPass::input_gradient) return Action::router_input_grad;
    if (op.gemm.count == 1 && op.gemm_pass == GemmPass::weight_gradient) return Action::router_weight_grad;
    unsupported(rc, index, "a router GEMM other than its backward's two products");
  }
  switch (op.gemm_pass) {
    case GemmPass::forward: return Action::expert_forward;
    case GemmPass::input_gradient: return Action::expert_input_grad;
    case GemmPass::weight_gradient: return Action::expert_weight_grad;
    case GemmPass::none: break;
  }
  unsupported(rc, index, "an expert GEMM that does not say which product it computes");
}

Action tensor_collective_action(const RankClass& rc, OpIndex index) {
  const Op& op = rc.op(index);
  if (op.linear == OpRole::none) unsupported(rc, index, "a tensor-parallel collective that serves no linear");
  switch (op.linear_tensor) {
    case LinearTensor::input: return Action::gather_input;
    case LinearTensor::output: return Action::reduce_output;
    case LinearTensor::output_gradient: return Action::gather_output_grad;
    case LinearTensor::input_gradient: return Action::reduce_input_grad;
    case LinearTensor::weight:
    case LinearTensor::none: break;
  }
  unsupported(rc, index, "a tensor-parallel collective that does not say which tensor it moves");
}

Action attention_action(const RankClass& rc, OpIndex index) {
  const bool backward = rc.op(index).phase == Phase::backward;
  switch (rc.op(index).context_form) {
    case ContextForm::none: return backward ? Action::attention_backward : Action::attention_forward;
    case ContextForm::ring: return backward ? Action::ring_attention_backward : Action::ring_attention_forward;
    case ContextForm::all_gather: break;
  }
  unsupported(rc, index, "an attention block of all-gathered context parallelism (cp_comm_type all_gather)");
}

// A send or receive, by what it says it moves. An asymmetric plan's gradient ring reduces at its reduce-scatter
// half's first send and, under ZeRO-1, gathers the updated weights at its all-gather half's first send; its other
// steps mark their place.
Action transfer_action(const RankClass& rc, OpIndex index) {
  const Op& op = rc.op(index);
  const bool send = op.kind == OpKind::send, backward = op.phase == Phase::backward;
  const bool first_send = send && op.ring_step == 0;
  switch (op.transfer) {
    case Transfer::activation: return send ? Action::send_activation : Action::recv_activation;
    case Transfer::gradient: return send ? Action::send_gradient : Action::recv_gradient;
    case Transfer::strands: return send ? Action::send_strands : Action::recv_strands;
    case Transfer::context_ring:
      if (!send || op.ring_step < 0) break;
      return backward ? Action::ring_exchange_backward : Action::ring_exchange;
    case Transfer::switch_weights:
    case Transfer::switch_gradients: return Action::switch_transfer;
    case Transfer::pipelines_reduce: return first_send ? Action::pipelines_reduce : Action::pipelines_ring_step;
    case Transfer::pipelines_gather_weights: return first_send ? Action::pipelines_gather : Action::pipelines_ring_step;
    case Transfer::pipelines_gather_gradients: return Action::pipelines_ring_step;
    case Transfer::phase_handoff: return Action::phase_handoff;
    case Transfer::tensor_ring: unsupported(rc, index, "a userbuffers ring step (tp_comm_overlap)");
    case Transfer::none: unsupported(rc, index, "a point-to-point transfer that does not say what it moves");
  }
  unsupported(rc, index, "a context-parallel exchange off the ring");
}

// RMSNorm and LayerNorm are one action each way: the op names its norm, and the kernel entry runs that one
// (gpu/op_kernels.hpp); the LayerNorm's bias is in the norm's unit (executor/parameters.hpp).
Action norm_action(const RankClass& rc, OpIndex index) {
  return rc.op(index).kind == OpKind::norm_backward ? Action::norm_backward : Action::norm_forward;
}

}  // namespace

std::string to_string(Action action) {
  static const char* names[] = {
      "embedding_forward", "embedding_backward", "norm_forward", "norm_backward", "linear_forward",
      "linear_input_grad", "linear_weight_grad", "rope_forward", "rope_backward", "attention_forward",
      "attention_backward", "activation_forward", "activation_backward", "residual_forward", "residual_backward",
      "loss_forward", "loss_reduce", "loss_backward", "gather_input", "reduce_output", "gather_output_grad",
      "reduce_input_grad", "send_activation", "recv_activation", "send_gradient", "recv_gradient", "send_strands",
      "recv_strands", "grad_reduce", "param_gather", "embedding_grad_sync", "grad_norm", "optimizer_step",
      "router_forward", "routing_counts_reduce", "router_input_grad", "router_weight_grad", "expert_dispatch",
      "expert_dispatch_backward", "expert_forward", "expert_input_grad", "expert_weight_grad",
      "expert_activation_forward", "expert_activation_backward", "expert_combine", "expert_combine_backward",
      "dispatch_exchange", "combine_exchange", "dispatch_exchange_backward", "combine_exchange_backward",
      "ring_attention_forward", "ring_attention_backward", "ring_exchange", "ring_exchange_backward", "ring_merge",
      "ring_gradient_add", "ulysses_to_heads", "ulysses_to_sequence", "phase_handoff",
      "switch_transfer", "pipelines_reduce", "pipelines_gather", "pipelines_ring_step", "fp8_cast", "fp8_amax_reduce",
      "fp8_gathered_amax", "fp8_transpose", "mla_step", "grad_accumulation"};
  static_assert(std::size(names) == static_cast<std::size_t>(Action::grad_accumulation) + 1, "a name per action");
  return names[static_cast<int>(action)];
}

namespace {

void bind_gemm(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  b.subject = op.role;
  if (op.role == OpRole::router || op.role == OpRole::expert_fc1 || op.role == OpRole::expert_fc2) {
    if (is_fp8(op.gemm)) unsupported(rc, i, "an FP8 GEMM of an experts block");
    b.action = moe_gemm_action(rc, i);
    return;
  }
  b.action = gemm_action(rc, i);
  if (op.gemm.count != 1) unsupported(rc, i, "a grouped GEMM of a dense linear");
  if (is_fp8(op.gemm) && (op.role == OpRole::shared_expert_fc1 || op.role == OpRole::shared_expert_fc2))
    unsupported(rc, i, "an FP8 GEMM of the shared experts");
  if (op.gemm.inputs == GemmInputs::mxfp8)
    unsupported(rc, i, "an FP8 GEMM of MX scales (twin execute runs per-tensor and 128-element block scales)");
}

void bind_elementwise(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  const bool backward = op.phase == Phase::backward;
  if (op.context_form == ContextForm::ring) {
    b.action = backward ? Action::ring_gradient_add : Action::ring_merge;
    return;
  }
  if (op.role == OpRole::grad_accumulation) {  // its GEMM: bind_gradient_accumulations
    b.action = Action::grad_accumulation;
    b.subject = op.linear;
    return;
  }
  if (op.role != OpRole::attention_residual && op.role != OpRole::mlp_residual)
    unsupported(rc, i, "an elementwise op other than a residual add or a weight gradient's accumulation");
  b.action = backward ? Action::residual_backward : Action::residual_forward;
  b.subject = op.role;
}

void bind_fp8_cast(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  if (op.linear_tensor != LinearTensor::input && op.linear_tensor != LinearTensor::output_gradient &&
      op.linear_tensor != LinearTensor::weight)
    unsupported(rc, i, "an FP8 cast that does not say which tensor of its linear it casts");
  b.action = Action::fp8_cast;
  b.subject = op.linear;
}

void bind_fp8_transpose(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  if (op.linear_tensor != LinearTensor::input && op.linear_tensor != LinearTensor::output_gradient)
    unsupported(rc, i, "an FP8 transpose of neither a linear's gathered input nor its gathered output gradient");
  b.action = Action::fp8_transpose;
  b.subject = op.linear;
}

void bind_all_to_all(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  const bool backward = op.phase == Phase::backward;
  if (op.group == GroupKind::tensor) {  // a Ulysses layer's: the linear tensor it moves says which way
    b.subject = op.linear;
    switch (op.linear_tensor) {
      case LinearTensor::output:
      case LinearTensor::input_gradient: b.action = Action::ulysses_to_heads; return;
      case LinearTensor::input:
      case LinearTensor::output_gradient: b.action = Action::ulysses_to_sequence; return;
      case LinearTensor::weight:
      case LinearTensor::none: unsupported(rc, i, "an all-to-all over a tensor group that moves no linear's tensor");
    }
    return;
  }
  if (op.group != GroupKind::expert || (op.role != OpRole::dispatch && op.role != OpRole::combine))
    unsupported(rc, i, "an all-to-all other than expert parallelism's or a Ulysses layer's");
  if (op.role == OpRole::dispatch)
    b.action = backward ? Action::dispatch_exchange_backward : Action::dispatch_exchange;
  else
    b.action = backward ? Action::combine_exchange_backward : Action::combine_exchange;
}

void bind_collective(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  if (op.context_form == ContextForm::all_gather)
    unsupported(rc, i, "a collective of all-gathered context parallelism (cp_comm_type all_gather)");
  switch (op.role) {
    case OpRole::grad_reduce: b.action = Action::grad_reduce; break;
    case OpRole::param_gather: b.action = Action::param_gather; break;
    case OpRole::embedding_grad_sync: b.action = Action::embedding_grad_sync; break;
    case OpRole::grad_norm: b.action = Action::grad_norm; break;
    case OpRole::fp8_amax:
      if (op.kind != OpKind::all_reduce) unsupported(rc, i, "an FP8 amax reduction other than an all-reduce");
      if (op.group == GroupKind::tensor && op.linear != OpRole::none) {  // a tensor SP gathers (current scaling)
        b.subject = op.linear;
        b.action = Action::fp8_gathered_amax;
        break;
      }
      if (op.group != GroupKind::amax)
        unsupported(rc, i, "an FP8 amax reduction over neither the amax group nor, for one linear's tensor, TP");
      b.action = Action::fp8_amax_reduce;
      break;
    case OpRole::loss: b.action = Action::loss_reduce; break;
    case OpRole::router: b.action = Action::routing_counts_reduce; break;
    case OpRole::tp_gather:
    case OpRole::tp_scatter:
    case OpRole::tp_reduce:
      b.subject = op.linear;
      b.action = tensor_collective_action(rc, i);
      break;
    case OpRole::none: case OpRole::embedding: case OpRole::input_norm: case OpRole::qkv_projection:
    case OpRole::rope: case OpRole::core_attention: case OpRole::attention_projection:
    case OpRole::attention_residual: case OpRole::mlp_norm: case OpRole::fc1: case OpRole::activation:
    case OpRole::fc2: case OpRole::mlp_residual: case OpRole::dispatch: case OpRole::expert_fc1:
    case OpRole::expert_activation: case OpRole::expert_fc2: case OpRole::combine: case OpRole::final_norm:
    case OpRole::output_projection: case OpRole::cp_exchange: case OpRole::pipeline_activation:
    case OpRole::pipeline_gradient: case OpRole::optimizer: case OpRole::grad_accumulation:
    case OpRole::phase_handoff: case OpRole::qk_norm: case OpRole::shared_expert_fc1:
    case OpRole::shared_expert_activation: case OpRole::shared_expert_fc2: case OpRole::mla_q_down:
    case OpRole::mla_q_norm: case OpRole::mla_q_up: case OpRole::mla_kv_down: case OpRole::mla_kv_norm:
    case OpRole::mla_kv_up: case OpRole::mla_kv_expand: case OpRole::post_attention_norm:
    case OpRole::post_mlp_norm: case OpRole::mtp_embedding_norm: case OpRole::mtp_hidden_norm:
    case OpRole::mtp_projection:
      unsupported(rc, i, "a collective of a role no collective serves");
  }
  if (op.group == GroupKind::expert) unsupported(rc, i, "a collective over an expert group");
  if (op.group == GroupKind::expert_data && b.action != Action::grad_reduce && b.action != Action::param_gather)
    unsupported(rc, i, "a collective over the expert-data group other than the experts' gradients or weights");
}

bool is_mla_role(OpRole role) {
  return role == OpRole::mla_q_down || role == OpRole::mla_q_norm || role == OpRole::mla_q_up ||
         role == OpRole::mla_kv_down || role == OpRole::mla_kv_norm || role == OpRole::mla_kv_up ||
         role == OpRole::mla_kv_expand;
}

// The op's action and subject, or an `unsupported` error naming the op.
void bind_op(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  const bool backward = op.phase == Phase::backward;
  if (!op_kind_traits(op.kind).executor_runs) unsupported(rc, i, fmt::format("a {} op", op_kind_traits(op.kind).name).c_str());
  if (is_mla_role(op.role)) unsupported(rc, i, "an op of multi-latent attention in a model bound without it");
  switch (op.kind) {
    case OpKind::gemm: bind_gemm(rc, i, b); break;
    case OpKind::attention_forward:
    case OpKind::attention_backward:
      b.action = attention_action(rc, i);
      if (op.attention.sinks) {  // the layer's sinks: read forward, their gradient written backward
        if (op.context_form != ContextForm::none) unsupported(rc, i, "attention sinks under context parallelism");
        b.subject = OpRole::core_attention;
      }
      break;
    case OpKind::norm_forward:
    case OpKind::norm_backward:
      b.action = norm_action(rc, i);
      b.subject = op.role;
      break;
    case OpKind::rope_forward: b.action = Action::rope_forward; break;
    case OpKind::rope_backward: b.action = Action::rope_backward; break;
    case OpKind::activation_forward:
      b.action = op.role == OpRole::expert_activation ? Action::expert_activation_forward : Action::activation_forward;
      break;
    case OpKind::activation_backward:
      b.action = op.role == OpRole::expert_activation ? Action::expert_activation_backward : Action::activation_backward;
      break;
    case OpKind::elementwise: bind_elementwise(rc, i, b); break;
    case OpKind::embedding_forward:
      b.action = Action::embedding_forward;
      b.subject = OpRole::embedding;
      break;
    case OpKind::embedding_backward:
      b.action = Action::embedding_backward;
      b.subject = OpRole::embedding;
      break;
    case OpKind::loss_forward: b.action = Action::loss_forward; break;
    case OpKind::loss_backward: b.action = Action::loss_backward; break;
    case OpKind::optimizer_step: b.action = Action::optimizer_step; break;
    case OpKind::fp8_cast: bind_fp8_cast(rc, i, b); break;
    case OpKind::fp8_transpose: bind_fp8_transpose(rc, i, b); break;
    case OpKind::moe_router:
      if (backward) unsupported(rc, i, "a router op in a backward pass");
      b.action = Action::router_forward;
      b.subject = OpRole::router;
      break;
    case OpKind::moe_permute: b.action = backward ? Action::expert_dispatch_backward : Action::expert_dispatch; break;
    case OpKind::moe_unpermute: b.action = backward ? Action::expert_combine_backward : Action::expert_combine; break;
    case OpKind::all_to_all: bind_all_to_all(rc, i, b); break;
    case OpKind::send:
    case OpKind::recv: b.action = transfer_action(rc, i); break;
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter: bind_collective(rc, i, b); break;
  }
}

// An op of an MLA model's attention block (every layer's: its mla_* roles, RoPE and attention): its step, the weight it
// works on. The rest of the layer binds as a dense one's.
bool bind_mla(const RankClass& rc, OpIndex i, OpBinding& b) {
  const Op& op = rc.op(i);
  const std::optional<MlaStep> step = mla_step_of(op);
  if (!step) {
    if (is_mla_role(op.role) || is_mla_role(op.linear))
      unsupported(rc, i, "an op of multi-latent attention other than its block's steps (a TP collective or a cast)");
    return false;
  }
  if (op.kind == OpKind::gemm && (is_fp8(op.gemm) || op.gemm.count != 1))
    unsupported(rc, i, "an FP8 or grouped GEMM of multi-latent attention");
  if (op.context_form != ContextForm::none) unsupported(rc, i, "multi-latent attention under context parallelism");
  b.action = Action::mla_step;
  b.mla_step = *step;
  b.subject = is_mla_role(op.role) ? op.role : OpRole::none;
  return true;
}

// Each grad_accumulation op names its linear (Op::linear); the weight-gradient GEMM of that linear in the same layer,
// micro-batch and chunk writes what it adds, apart from the gradient (OpBinding::gradient_apart). One GEMM each, run
// as a dense linear's (the experts' grouped GEMMs and the router's, which the lowering adds apart too, are refused).
void bind_gradient_accumulations(const RankClass& rc, std::vector<OpBinding>& bindings) {
  using GemmKey = std::tuple<std::int32_t, OpRole, std::int32_t, std::int16_t>;  // layer, linear, micro-batch, chunk
  std::map<GemmKey, OpIndex> weight_gradients;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind == OpKind::gemm && op.gemm_pass == GemmPass::weight_gradient)
      weight_gradients[{op.layer, op.role, op.micro_batch, op.chunk}] = i;
  }
  std::set<OpIndex> added;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (bindings[i].action != Action::grad_accumulation) continue;
    const auto gemm = weight_gradients.find({op.layer, op.linear, op.micro_batch, op.chunk});
    if (gemm == weight_gradients.end() || gemm->second > i)
      unsupported(rc, i, "a gradient accumulation with no weight-gradient GEMM of its linear before it");
    if (bindings[gemm->second].action != Action::linear_weight_grad)
      unsupported(rc, i, "a gradient accumulation of a weight that is not a dense linear's");
    if (!added.insert(gemm->second).second) unsupported(rc, i, "a second gradient accumulation of one GEMM");
    bindings[gemm->second].gradient_apart = true;
  }
}

// Which weight-gradient ops store (rather than add to) their gradient: the first of each (layer, weight) in op order.
void mark_first_gradients(const RankClass& rc, bool tied_embeddings, std::vector<OpBinding>& bindings) {
  std::set<GradientKey> written;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    OpBinding& b = bindings[i];
    // An add apart writes the weight's gradient but never stores it (the step zeroed it): a writer after it adds.
    if (const std::optional<GradientKey> key = gradient_key(rc.op(i), b, tied_embeddings))
      b.first_gradient = written.insert(*key).second && b.action != Action::grad_accumulation;
    if (b.action == Action::embedding_backward)  // the positions' gradient: only the embedding backward writes it
      b.first_position_gradient = written.insert({rc.op(i).layer, OpRole::none}).second;
  }
}

}  // namespace

std::optional<GradientKey> gradient_key(const Op& op, const OpBinding& b, bool tied_embeddings) {
  // A weight gradient added apart is written by its add, not its GEMM (the add never stores: mark_first_gradients).
  const bool writes = (b.action == Action::linear_weight_grad && !b.gradient_apart) ||
                      b.action == Action::grad_accumulation || b.action == Action::norm_backward ||
                      b.action == Action::embedding_backward || b.action == Action::router_weight_grad ||
                      b.action == Action::expert_weight_grad ||
                      (b.action == Action::attention_backward && op.attention.sinks) ||
                      (b.action == Action::mla_step && writes_weight_gradient(b.mla_step));
  if (!writes) return std::nullopt;
  const bool tied_output = tied_embeddings && b.subject == OpRole::output_projection;
  return GradientKey{op.layer, tied_output ? OpRole::embedding : b.subject};
}

std::vector<OpBinding> bind_ops(const RankClass& rc, bool tied_embeddings, bool mla) {
  std::vector<OpBinding> bindings(rc.size());
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (!mla || !bind_mla(rc, i, bindings[i])) bind_op(rc, i, bindings[i]);
  bind_gradient_accumulations(rc, bindings);
  mark_first_gradients(rc, tied_embeddings, bindings);
  return bindings;
}

}  // namespace twin::exec
