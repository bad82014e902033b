// The ops between the linears of a layer: RoPE, attention and the MLP activation. RoPE and attention run per run
// of equal sequences of a micro-batch's rows (one run unless rows pack several sequences: hot switching). A Ulysses
// layer's attention works on its tensors' heads layout (executor/gpu/ulysses_exchange.hpp): their gathered forms.
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "executor/context_rows.hpp"
#include "executor/gpu/dense_block.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "gpu/op_kernels.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);

// The attention block's tensors in the forms a layer of `layout` keeps them.
struct AttentionTensors {
  Act qkv, out, stats, d_qkv, d_out;
};
AttentionTensors attention_tensors(const UnitLayout& layout) {
  const layer::Block& attention = layer::block_of(OpRole::core_attention);
  const Form value = layout.ulysses ? Form::gathered : Form::value;
  const Form gradient = layout.ulysses ? Form::gradient_gathered : Form::gradient;
  return {{attention.input, value}, {attention.output, value}, {attention.stats}, {attention.input, gradient},
          {attention.output, gradient}};
}

// The layer's sinks where the op says it has them (else null): their offset in the unit's buffers. Their heads are
// the rank's own (executor/parameters.cpp); a Ulysses layer's attention would take other heads of whole weights, and
// the plan check refuses it.
const WeightTensor* sinks_of(const OpPass& p, const ParameterUnit& unit, const UnitLayout& layout) {
  if (!p.op.attention.sinks) return nullptr;
  if (layout.ulysses) throw std::logic_error("executor: attention sinks in a Ulysses layer");
  const WeightTensor* sinks = unit.find(OpRole::core_attention, WeightPart::sinks);
  if (!sinks || sinks->elements() != layout.shapes.heads)
    throw std::logic_error("attention op " + op_name(p.op) + ": with sinks, but its unit holds none for its heads");
  return sinks;
}

}  // namespace

kernels::AttentionDims run_attention_dims(const Op& op, const lowering::RankShapes& s, const EqualSequences& run) {
  kernels::AttentionDims dims = gpu::attention_dims(op.attention, s.attention_softcap);
  if (dims.heads != s.heads || dims.kv_heads != s.groups || dims.head_dim != s.d || !dims.causal)
    throw std::logic_error("attention op " + op_name(op) + ": its heads, head dim or mask are not the layer's");
  dims.batch = run.sequences;
  dims.seq = run.length;
  dims.q_row_stride = dims.kv_row_stride = s.qkv_width;
  return dims;
}

// Rows rotated as positions first_position + (row % period). Under context parallelism a rank's rows of a sequence
// are two chunks, r and 2cp-1-r of 2cp, each at its place in the whole sequence (executor/context_rows.hpp, the walk
// hidden dropout's batch tokens take too).
std::vector<DenseBlock::RopeRun> DenseBlock::rope_runs(int mb, const lowering::RankShapes& s) const {
  std::vector<RopeRun> runs;
  if (s.cp == 1) {
    for (const EqualSequences& run : stage_.layout.sequence_runs(mb, s))
      runs.push_back({run.first_token, run.sequences * run.length, run.length, 0});
    return runs;
  }
  for (const ContextRowRun& run : context_row_runs(s.b, s.s, stage_.layout.me().cp, s.cp))
    runs.push_back({run.first_row, run.rows, run.rows, run.first_position});
  return runs;
}

void DenseBlock::rope_forward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  auto* qkv = static_cast<bf16*>(stage_.tensors.get(p.mb, p.unit, attention_tensors(layout).qkv));
  for (const RopeRun& run : rope_runs(p.mb, s)) {
    bf16* q = qkv + run.first_token * s.qkv_width;
    const kernels::RopeShape shape{run.tokens, run.period, static_cast<int>(s.heads), static_cast<int>(s.groups),
                                   static_cast<int>(s.d), s.qkv_width, s.qkv_width};
    launch_op(p.op, p.binding,
              gpu::RopeForward{q, q + s.heads * s.d, rope_table_ + run.first_position * (s.d / 2), shape}, p.stream);
  }
}

void DenseBlock::rope_backward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  auto* d_qkv = static_cast<bf16*>(stage_.tensors.get(p.mb, p.unit, attention_tensors(layout).d_qkv));
  for (const RopeRun& run : rope_runs(p.mb, s)) {
    bf16* dq = d_qkv + run.first_token * s.qkv_width;
    const kernels::RopeShape shape{run.tokens, run.period, static_cast<int>(s.heads), static_cast<int>(s.groups),
                                   static_cast<int>(s.d), s.qkv_width, s.qkv_width};
    launch_op(p.op, p.binding,
              gpu::RopeBackward{dq, dq + s.heads * s.d, rope_table_ + run.first_position * (s.d / 2), shape},
              p.stream);
  }
}

void DenseBlock::attention_forward(const OpPass& p) {
  if (!p.op.attention.flash) return unfused_attention_forward(p);
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  const AttentionTensors t = attention_tensors(layout);
  const std::int64_t q_width = s.heads * s.d, kv_width = s.groups * s.d;
  TensorStore& tensors = stage_.tensors;
  const auto* qkv = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.qkv));
  auto* o = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.out, s.tokens * q_width * kBf16, p.stream));
  // lse is [sequences, heads, length] per run: a run's block starts at heads * its first token.
  auto* lse = static_cast<float*>(tensors.make(p.mb, p.unit, t.stats, s.b * s.heads * s.s * sizeof(float), p.stream));
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  const WeightTensor* sinks = sinks_of(p, unit, layout);
  for (const EqualSequences& run : stage_.layout.sequence_runs(p.mb, s)) {
    const bf16* q = qkv + run.first_token * s.qkv_width;
    launch_op(p.op, p.binding,
              gpu::AttentionForward{attention_.get(), q, q + q_width, q + q_width + kv_width,
                                    o + run.first_token * q_width, lse + s.heads * run.first_token,
                                    run_attention_dims(p.op, s, run),
                                    attention_dropout(p.op, p.mb, p.unit, run.first_token),
                                    sinks ? unit.params + sinks->offset : nullptr},
              p.stream);
  }
}

void DenseBlock::attention_backward(const OpPass& p) {
  if (!p.op.attention.flash) return unfused_attention_backward(p);
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  const AttentionTensors t = attention_tensors(layout);
  const std::int64_t q_width = s.heads * s.d, kv_width = s.groups * s.d;
  TensorStore& tensors = stage_.tensors;
  const auto* qkv = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.qkv));
  auto* d_qkv = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.d_qkv, s.tokens * s.qkv_width * kBf16, p.stream));
  const auto* o = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.out));
  const auto* d_o = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.d_out));
  const auto* lse = static_cast<const float*>(tensors.get(p.mb, p.unit, t.stats));
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  const WeightTensor* sinks = sinks_of(p, unit, layout);
  bool accumulate_sinks = !p.binding.first_gradient;  // the first run stores, later runs add
  for (const EqualSequences& run : stage_.layout.sequence_runs(p.mb, s)) {
    const std::int64_t row = run.first_token * s.qkv_width;
    const bf16* q = qkv + row;
    bf16* dq = d_qkv + row;
    gpu::AttentionBackward call{attention_.get(), q, q + q_width, q + q_width + kv_width,
                                o + run.first_token * q_width, d_o + run.first_token * q_width,
                                lse + s.heads * run.first_token, dq, dq + q_width, dq + q_width + kv_width,
                                run_attention_dims(p.op, s, run),
                                attention_dropout(p.op, p.mb, p.unit, run.first_token)};
    if (sinks) {
      call.sinks = unit.params + sinks->offset;
      call.d_sinks = unit.bf16_grads() + sinks->offset;
      call.accumulate_sinks = accumulate_sinks;
      accumulate_sinks = true;
    }
    launch_op(p.op, p.binding, call, p.stream);
  }
  for (Act done : {t.qkv, t.out, t.stats, t.d_out}) tensors.release(p.mb, p.unit, done, p.stream);
}

// Unfused attention keeps its scores in the block's statistics slot, each run of sequences' after the one before.
// Under selective recompute the forward drops them and the recomputed forward, before the backward, makes them
// again (the memory model keeps them only unrecomputed: core/layer.cpp).
void DenseBlock::unfused_attention_forward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  const AttentionTensors t = attention_tensors(layout);
  const std::int64_t q_width = s.heads * s.d, kv_width = s.groups * s.d;
  const bool dropout = p.op.dropout > 0;
  TensorStore& tensors = stage_.tensors;
  const std::vector<EqualSequences> runs = stage_.layout.sequence_runs(p.mb, s);
  std::int64_t bytes = 0;
  for (const EqualSequences& run : runs) bytes += gpu::unfused_scores_bytes(run_attention_dims(p.op, s, run), dropout);
  auto* scores = static_cast<std::byte*>(tensors.make(p.mb, p.unit, t.stats, bytes, p.stream));
  const auto* qkv = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.qkv));
  auto* o = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.out, s.tokens * q_width * kBf16, p.stream));
  for (const EqualSequences& run : runs) {
    const kernels::AttentionDims dims = run_attention_dims(p.op, s, run);
    const bf16* q = qkv + run.first_token * s.qkv_width;
    gpu::AttentionForward call;
    call.q = q, call.k = q + q_width, call.v = q + q_width + kv_width, call.o = o + run.first_token * q_width;
    call.dims = dims;
    call.dropout = attention_dropout(p.op, p.mb, p.unit, run.first_token);
    call.unfused = unfused_.get();
    call.scores = gpu::unfused_scores_in(scores, dims, dropout);
    launch_op(p.op, p.binding, call, p.stream);
    scores += gpu::unfused_scores_bytes(dims, dropout);
  }
  if (!p.op.recomputed && stage_.layout.recompute_of(p.op.layer) == Recompute::selective)
    tensors.release(p.mb, p.unit, t.stats, p.stream);
}

void DenseBlock::unfused_attention_backward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  const AttentionTensors t = attention_tensors(layout);
  const std::int64_t q_width = s.heads * s.d, kv_width = s.groups * s.d;
  const bool dropout = p.op.dropout > 0;
  TensorStore& tensors = stage_.tensors;
  const auto* qkv = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.qkv));
  auto* d_qkv = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.d_qkv, s.tokens * s.qkv_width * kBf16, p.stream));
  const auto* d_o = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.d_out));
  auto* scores = static_cast<std::byte*>(tensors.get(p.mb, p.unit, t.stats));
  for (const EqualSequences& run : stage_.layout.sequence_runs(p.mb, s)) {
    const kernels::AttentionDims dims = run_attention_dims(p.op, s, run);
    const std::int64_t row = run.first_token * s.qkv_width;
    gpu::AttentionBackward call;
    call.q = qkv + row, call.k = qkv + row + q_width, call.v = qkv + row + q_width + kv_width;
    call.d_o = d_o + run.first_token * q_width;
    call.dq = d_qkv + row, call.dk = d_qkv + row + q_width, call.dv = d_qkv + row + q_width + kv_width;
    call.dims = dims;
    call.dropout = attention_dropout(p.op, p.mb, p.unit, run.first_token);
    call.unfused = unfused_.get();
    call.scores = gpu::unfused_scores_in(scores, dims, dropout);
    launch_op(p.op, p.binding, call, p.stream);
    scores += gpu::unfused_scores_bytes(dims, dropout);
  }
  for (Act done : {t.qkv, t.out, t.stats, t.d_out}) tensors.release(p.mb, p.unit, done, p.stream);
}

void DenseBlock::activation_forward(const OpPass& p) {
  const layer::Block& activation = layer::block_of(OpRole::activation);
  const Op& op = p.op;
  auto* act = static_cast<bf16*>(stage_.tensors.make(p.mb, p.unit, {activation.output},
                                                     op.rows * op.cols * kBf16, p.stream));
  const auto* fc1 = static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, {activation.input}));
  const lowering::RankShapes& shapes = stage_.layout.layout(p.unit).shapes;
  launch_op(op, p.binding, gpu::ActivationForward{op.activation, fc1, act, op.rows, op.cols, glu_terms(shapes)},
            p.stream);
}

void DenseBlock::activation_backward(const OpPass& p) {
  const layer::Block& activation = layer::block_of(OpRole::activation);
  const Op& op = p.op;
  const Act act_in{activation.input}, d_act_out{activation.output, Form::gradient};
  const Activation function = op.activation;
  const std::int64_t width = (is_gated(function) ? 2 : 1) * op.cols;
  auto* d_fc1 = static_cast<bf16*>(stage_.tensors.make(p.mb, p.unit, {activation.input, Form::gradient},
                                                       op.rows * width * kBf16, p.stream));
  const auto* fc1 = static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, act_in));
  const auto* d_act = static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, d_act_out));
  const lowering::RankShapes& shapes = stage_.layout.layout(p.unit).shapes;
  launch_op(op, p.binding, gpu::ActivationBackward{function, fc1, d_act, d_fc1, op.rows, op.cols, glu_terms(shapes)},
            p.stream);
  for (Act done : {act_in, d_act_out}) stage_.tensors.release(p.mb, p.unit, done, p.stream);
}

}  // namespace twin::exec
