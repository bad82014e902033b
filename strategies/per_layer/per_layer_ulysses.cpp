// Shapes of a layer strategy, and the ops of a Ulysses layer. Ulysses keeps each GPU's sequence shard
// through the linears (weights whole, rows = local tokens) and re-shards by heads only for core
// attention: one all-to-all for Q, K and V before it, one for the output after it. The all-to-alls run
// on the tensor group (the Ulysses group) and carry the roles tp_gather (sequence to heads) and
// tp_scatter (heads to sequence).
#include <algorithm>

#include "strategies/per_layer/per_layer_lowering.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::per_layer {
using lowering::Emitter;
using lowering::RankShapes;
namespace {

Strategy megatron_strategy(const Scenario& scenario, int tp, int stage_gpus, int stage_micro_batch) {
  Strategy st;
  st.tensor_model_parallel_size = tp;
  st.pipeline_model_parallel_size = scenario.cluster.total_gpus() / stage_gpus;
  st.data_parallel_size = stage_gpus / tp;
  st.sequence_parallel = tp > 1;
  st.micro_batch_size = std::max(1, stage_micro_batch * tp / stage_gpus);
  return st;
}

Op attention(const RankShapes& s, bool backward) {
  Op op;
  op.kind = backward ? OpKind::attention_backward : OpKind::attention_forward;
  op.role = OpRole::core_attention;
  op.attention = {s.b, s.heads, s.groups, s.s, s.s, s.d, true};
  op.flops = 4.0 * s.b * s.heads * s.s * s.s * s.d * 0.5 * (backward ? 2.5 : 1.0);
  return op;
}

Op all_to_all(const RankShapes& s, OpRole role, std::int64_t width) {
  return Emitter::collective(OpKind::all_to_all, role, Stream::tp_comm, GroupKind::tensor, s.tp,
                             s.tokens_local * width * 2);
}

std::int64_t q_width(const RankShapes& s) { return s.heads * s.tp * s.d; }
std::int64_t qkv_width(const RankShapes& s) { return (s.heads + 2 * s.groups) * s.tp * s.d; }
std::int64_t residual_bytes(const RankShapes& s) { return 3 * s.tokens_local * s.h * 2; }

// dgrad then wgrad of a linear with whole weights on the local rows; the chain continues from dgrad.
void linear_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  const OpIndex dgrad = e.emit(Emitter::gemm(role, GemmPass::input_gradient, s.tokens_local, k_in, n_out));
  e.emit(Emitter::gemm(role, GemmPass::weight_gradient, k_in, n_out, s.tokens_local));
  e.chain = dgrad;
}

}  // namespace

RankShapes layer_shapes(const Scenario& scenario, const LayerStrategy& ls, int stage_gpus, int stage_micro_batch) {
  const int t = ls.layout.group;
  Strategy st = megatron_strategy(scenario, t, stage_gpus, stage_micro_batch);
  st.zero_stage = ls.zero_stage;
  st.recompute = ls.recompute;
  RankShapes s = lowering::rank_shapes(scenario, st);
  if (ls.layout.ulysses) {  // weights whole, data parallel over the stage; heads per GPU stay split by t
    const ModelConfig& m = scenario.model;
    s.sp = false;
    s.data_group = stage_gpus;
    s.expert_data_group = stage_gpus;
    s.ffn = m.ffn_hidden_size;
    s.fc1_width = (s.swiglu ? 2 : 1) * s.ffn;
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
  const RankShapes& s = e.shapes();
  e.set_layer(layer);
  e.emit(Emitter::rows_cols(OpKind::norm_forward, OpRole::input_norm, s.tokens_local, s.h));
  e.emit(Emitter::gemm(OpRole::qkv_projection, GemmPass::forward, s.tokens_local, qkv_width(s), s.h));
  e.emit(all_to_all(s, OpRole::tp_gather, qkv_width(s)));
  if (s.rope) e.emit(Emitter::rows_cols(OpKind::rope_forward, OpRole::rope, s.tokens, (s.heads + s.groups) * s.d));
  e.emit(attention(s, false));
  e.emit(all_to_all(s, OpRole::tp_scatter, q_width(s)));
  e.emit(Emitter::gemm(OpRole::attention_projection, GemmPass::forward, s.tokens_local, s.h, q_width(s)));
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::attention_residual, residual_bytes(s)));
  e.emit(Emitter::rows_cols(OpKind::norm_forward, OpRole::mlp_norm, s.tokens_local, s.h));
  e.emit(Emitter::gemm(OpRole::fc1, GemmPass::forward, s.tokens_local, s.fc1_width, s.h));
  e.emit(Emitter::rows_cols(OpKind::activation_forward, OpRole::activation, s.tokens_local, s.ffn));
  e.emit(Emitter::gemm(OpRole::fc2, GemmPass::forward, s.tokens_local, s.h, s.ffn));
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::mlp_residual, residual_bytes(s)));
}

void emit_ulysses_layer_backward(Emitter& e, const ModelConfig& model, int layer) {
  const RankShapes& s = e.shapes();
  if (s.recompute == Recompute::full) {  // the whole forward again, all-to-alls included
    e.set_phase(Phase::forward);
    e.set_recomputed(true);
    emit_ulysses_layer_forward(e, model, layer);
    e.set_recomputed(false);
    e.set_phase(Phase::backward);
  }
  e.set_layer(layer);
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::mlp_residual, residual_bytes(s)));
  linear_backward(e, OpRole::fc2, s.h, s.ffn);
  e.emit(Emitter::rows_cols(OpKind::activation_backward, OpRole::activation, s.tokens_local, s.ffn));
  linear_backward(e, OpRole::fc1, s.fc1_width, s.h);
  e.emit(Emitter::rows_cols(OpKind::norm_backward, OpRole::mlp_norm, s.tokens_local, s.h));
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::attention_residual, residual_bytes(s)));
  linear_backward(e, OpRole::attention_projection, s.h, q_width(s));
  e.emit(all_to_all(s, OpRole::tp_gather, q_width(s)));  // output gradient: sequence to heads
  if (s.recompute == Recompute::selective) {
    e.set_phase(Phase::forward);
    e.set_recomputed(true);
    e.emit(attention(s, false));
    e.set_recomputed(false);
    e.set_phase(Phase::backward);
  }
  e.emit(attention(s, true));
  if (s.rope) e.emit(Emitter::rows_cols(OpKind::rope_backward, OpRole::rope, s.tokens, (s.heads + s.groups) * s.d));
  e.emit(all_to_all(s, OpRole::tp_scatter, qkv_width(s)));  // dQ, dK, dV: heads to sequence
  linear_backward(e, OpRole::qkv_projection, qkv_width(s), s.h);
  e.emit(Emitter::rows_cols(OpKind::norm_backward, OpRole::input_norm, s.tokens_local, s.h));
}

}  // namespace twin::per_layer
