// Shapes of a layer strategy, and the ops of a Ulysses layer. Ulysses keeps each GPU's sequence shard
// through the linears (weights whole, rows = local tokens) and re-shards by heads only for core
// attention: one all-to-all for Q, K and V before it, one for the output after it. The all-to-alls run
// on the tensor group (the Ulysses group) and carry the roles tp_gather (sequence to heads) and
// tp_scatter (heads to sequence). The layer is the description's (core/layer.hpp): the same blocks in the
// same order as the Megatron lowering, with these linears and all-to-alls.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "strategies/per_layer/per_layer_lowering.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::per_layer {
using lowering::Emitter;
using lowering::RankShapes;
namespace {

// Whole sequences of the rank's heads, over the layer's window when it has one (the emitter's).
Op attention(const Emitter& e, const RankShapes& s, bool backward) {
  return Emitter::attention(s, e.attention_window(), backward, s.s, s.s, true);
}

// An all-to-all over the Ulysses group of a linear's tensor (`linear`'s `tensor`): tp_gather from the sequence
// layout to the heads layout, tp_scatter back.
Op all_to_all(const RankShapes& s, OpRole role, std::int64_t width, OpRole linear, LinearTensor tensor) {
  Op op = Emitter::collective(OpKind::all_to_all, role, Stream::tp_comm, GroupKind::tensor, s.tp,
                              s.tokens_local * width * 2);
  op.linear = linear;
  op.linear_tensor = tensor;
  return op;
}

// Widths of whole weights: the heads of all t GPUs of the Ulysses group.
std::int64_t ulysses_width(const RankShapes& s, layer::Width width) {
  switch (width) {
    case layer::Width::qkv: return (s.heads + 2 * s.groups) * s.tp * s.d;
    case layer::Width::query: return s.heads * s.tp * s.d;
    case layer::Width::hidden: case layer::Width::query_and_key: case layer::Width::value: case layer::Width::fc1:
    case layer::Width::ffn: case layer::Width::attention_scores: case layer::Width::heads:
    case layer::Width::experts: case layer::Width::expert_fc1: case layer::Width::expert_ffn:
    case layer::Width::vocab: case layer::Width::shared_fc1: case layer::Width::shared_ffn:
    case layer::Width::q_latent: case layer::Width::kv_latent: case layer::Width::two_hidden:
    case layer::Width::hidden_columns:
      return lowering::width_per_rank(s, width);
  }
  throw std::logic_error("ulysses_width: a width outside layer::Width");
}

// A linear with whole weights on the local rows.
void linear_forward(Emitter& e, const layer::Block& block) {
  const RankShapes& s = e.shapes();
  e.emit(Emitter::gemm(block.role, GemmPass::forward, s.tokens_local, ulysses_width(s, block.out_width),
                       ulysses_width(s, block.in_width)));
}

// dgrad then wgrad; the chain continues from dgrad.
void linear_backward(Emitter& e, const layer::Block& block) {
  const RankShapes& s = e.shapes();
  const std::int64_t n_out = ulysses_width(s, block.out_width), k_in = ulysses_width(s, block.in_width);
  const OpIndex dgrad = e.emit(Emitter::gemm(block.role, GemmPass::input_gradient, s.tokens_local, k_in, n_out));
  e.emit(Emitter::gemm(block.role, GemmPass::weight_gradient, k_in, n_out, s.tokens_local));
  e.chain = dgrad;
}

void block_ops(Emitter& e, const layer::Block& block, Phase phase) {
  const RankShapes& s = e.shapes();
  const bool backward = phase == Phase::backward;
  switch (block.kind) {
    case layer::BlockKind::norm: lowering::emit_norm(e, block, phase); return;
    case layer::BlockKind::column_linear:
    case layer::BlockKind::row_linear: backward ? linear_backward(e, block) : linear_forward(e, block); return;
    case layer::BlockKind::core_attention: {
      // Forward: Q, K, V sequence to heads, the output heads to sequence; backward the output gradient
      // sequence to heads, dQ, dK, dV heads to sequence.
      const std::int64_t before = ulysses_width(s, backward ? layer::Width::query : layer::Width::qkv);
      const std::int64_t after = ulysses_width(s, backward ? layer::Width::qkv : layer::Width::query);
      const Op rope = Emitter::rows_cols(backward ? OpKind::rope_backward : OpKind::rope_forward, OpRole::rope,
                                         s.tokens, (s.heads + s.groups) * s.d);
      // Forward: the QKV linear's output to heads, the attention output (the projection's input) back;
      // backward: the projection's input gradient to heads, the QKV linear's output gradient back.
      e.emit(backward
                 ? all_to_all(s, OpRole::tp_gather, before, OpRole::attention_projection, LinearTensor::input_gradient)
                 : all_to_all(s, OpRole::tp_gather, before, OpRole::qkv_projection, LinearTensor::output));
      if (s.rope && !backward) e.emit(rope);
      if (backward && s.recomputes(RecomputeModule::core_attn)) e.recompute([&] { e.emit(attention(e, s, false)); });
      e.emit(attention(e, s, backward));
      if (s.rope && backward) e.emit(rope);
      e.emit(backward ? all_to_all(s, OpRole::tp_scatter, after, OpRole::qkv_projection, LinearTensor::output_gradient)
                      : all_to_all(s, OpRole::tp_scatter, after, OpRole::attention_projection, LinearTensor::input));
      return;
    }
    case layer::BlockKind::activation:
      e.emit(Emitter::rows_cols(backward ? OpKind::activation_backward : OpKind::activation_forward, block.role,
                                s.tokens_local, s.ffn));
      return;
    case layer::BlockKind::residual: lowering::emit_residual(e, block, phase); return;
    case layer::BlockKind::experts:
    case layer::BlockKind::mla_attention:  // per-layer plans refuse MLA models (per_layer_search.cpp)
    case layer::BlockKind::embedding:
    case layer::BlockKind::loss: break;
  }
  throw std::logic_error("a Ulysses layer has no " + std::string(block.role == OpRole::router ? "MoE" : "edge or MLA") +
                         " block");
}

}  // namespace

RankShapes layer_shapes(const Scenario& scenario, const LayerStrategy& ls, int stage_gpus, int stage_micro_batch) {
  RankShapes s = lowering::rank_shapes(scenario, megatron_layer_strategy(scenario, ls, stage_gpus, stage_micro_batch));
  if (ls.layout.ulysses) {  // weights whole, data parallel over the stage; heads per GPU stay split by t
    const ModelConfig& m = scenario.model;
    s.sp = false;
    s.data_group = stage_gpus;
    s.expert_data_group = stage_gpus;
    s.ffn = m.ffn_hidden_size;
    s.fc1_width = (s.gated() ? 2 : 1) * s.ffn;
    s.vocab = padded_vocab_size(m, 1);
  }
  return s;
}

RankShapes edge_shapes(const Scenario& scenario, const LayerStrategy& ls, int stage_gpus, int stage_micro_batch) {
  RankShapes s = layer_shapes(scenario, ls, stage_gpus, stage_micro_batch);
  if (!ls.layout.ulysses) return s;
  const ModelConfig& m = scenario.model;
  s.tp = 1;
  s.tokens = s.tokens_local;
  s.heads = m.num_attention_heads;
  s.groups = m.num_query_groups;
  s.qkv_width = (s.heads + 2 * s.groups) * s.d;
  return s;
}

void emit_ulysses_layer_forward(Emitter& e, const ModelConfig& model, int layer) {
  e.set_attention_window(model.is_windowed_layer(layer) ? model.window_size : 0);
  const auto blocks = layer::layer_blocks(model.is_moe_layer(layer), false, model.post_norms);
  lowering::emit_unit_forward(e, blocks, layer, block_ops);
}

void emit_ulysses_layer_backward(Emitter& e, const ModelConfig& model, int layer) {
  e.set_attention_window(model.is_windowed_layer(layer) ? model.window_size : 0);
  const auto blocks = layer::layer_blocks(model.is_moe_layer(layer), false, model.post_norms);
  lowering::emit_unit_backward(e, blocks, layer, block_ops, e.shapes().recompute == Recompute::full);
}

}  // namespace twin::per_layer

namespace twin {

LayerLayout edge_layout(const LayerLayout& layout) { return {weight_tp(layout), false}; }

UnitExecution stage_unit_execution(const Scenario& scenario, const LayerStrategy& layer, bool edge, int gpus,
                                   int stage_micro_batch) {
  const LayerLayout weights_layout = edge_layout(layer.layout);
  UnitExecution out;
  out.weights =
      megatron_layer_strategy(scenario, {weights_layout, layer.zero_stage, layer.recompute}, gpus, stage_micro_batch);
  out.group = edge ? weights_layout.group : layer.layout.group;
  out.ulysses = !edge && layer.layout.ulysses;
  out.shapes = edge ? per_layer::edge_shapes(scenario, layer, gpus, stage_micro_batch)
                    : per_layer::layer_shapes(scenario, layer, gpus, stage_micro_batch);
  return out;
}

namespace {

UnitExecution in_plan(UnitExecution execution, const PerLayerPlan& plan) {
  execution.weights.num_micro_batches = plan.num_micro_batches;
  execution.weights.schedule = plan.schedule;
  return execution;
}

}  // namespace

UnitExecution layer_execution(const Scenario& scenario, const PerLayerPlan& plan, int layer) {
  return in_plan(stage_unit_execution(scenario, plan.layers.at(static_cast<std::size_t>(layer)), false,
                                      stage_gpus(scenario, plan), plan.stage_micro_batch),
                 plan);
}

UnitExecution edge_execution(const Scenario& scenario, const PerLayerPlan& plan, bool embedding) {
  return in_plan(stage_unit_execution(scenario, embedding ? plan.layers.front() : plan.layers.back(), true,
                                      stage_gpus(scenario, plan), plan.stage_micro_batch),
                 plan);
}

}  // namespace twin
