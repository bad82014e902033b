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

// A run's Q, K and V (or their gradients) in a [tokens, qkv_width] buffer: the run's rows, then each tensor's columns.
template <class T>
struct QkvOfRun {
  T *q, *k, *v;
};
template <class T>
QkvOfRun<T> qkv_of_run(T* qkv, const lowering::RankShapes& s, const EqualSequences& run) {
  T* q = qkv + run.first_token * s.qkv_width;
  return {q, q + s.heads * s.d, q + (s.heads + s.groups) * s.d};
}

// The statistics slot holds a flash op's log-sum-exp, [sequences, heads, length] per run (a run's block at heads x its
// first token), or an unfused op's kept scores, each run's after the one before. Where selective recompute repeats
// core attention (its `core_attn` module) an unfused forward drops its scores and the recomputed forward, before the
// backward, makes them again (the memory model keeps them only unrecomputed: core/layer.cpp).
void DenseBlock::attention_forward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  const AttentionTensors t = attention_tensors(layout);
  const std::int64_t q_width = s.heads * s.d;
  const bool unfused = !p.op.attention.flash, dropout = p.op.dropout > 0;
  TensorStore& tensors = stage_.tensors;
  const std::vector<EqualSequences> runs = stage_.layout.sequence_runs(p.mb, s);
  std::int64_t stats_bytes = s.b * s.heads * s.s * static_cast<std::int64_t>(sizeof(float));
  if (unfused) {
    stats_bytes = 0;
    for (const EqualSequences& run : runs) stats_bytes += gpu::unfused_scores_bytes(run_attention_dims(p.op, s, run), dropout);
  }
  auto* stats = static_cast<std::byte*>(tensors.make(p.mb, p.unit, t.stats, stats_bytes, p.stream));
  const auto* qkv = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.qkv));
  auto* o = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.out, s.tokens * q_width * kBf16, p.stream));
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  const WeightTensor* sinks = sinks_of(p, unit, layout);
  for (const EqualSequences& run : runs) {
    const QkvOfRun<const bf16> in = qkv_of_run(qkv, s, run);
    gpu::AttentionForward call;
    call.attention = attention_.get();
    call.q = in.q, call.k = in.k, call.v = in.v, call.o = o + run.first_token * q_width;
    call.dims = run_attention_dims(p.op, s, run);
    call.dropout = attention_dropout(p.op, p.mb, p.unit, run.first_token);
    call.sinks = sinks ? unit.params + sinks->offset : nullptr;
    if (unfused) {
      call.unfused = unfused_.get();
      call.scores = gpu::unfused_scores_in(stats, call.dims, dropout);
      stats += gpu::unfused_scores_bytes(call.dims, dropout);
    } else {
      call.lse = reinterpret_cast<float*>(stats) + s.heads * run.first_token;
    }
    launch_op(p.op, p.binding, call, p.stream);
  }
  if (unfused && !p.op.recomputed && s.recomputes(RecomputeModule::core_attn))
    tensors.release(p.mb, p.unit, t.stats, p.stream);
}

void DenseBlock::attention_backward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const lowering::RankShapes& s = layout.shapes;
  const AttentionTensors t = attention_tensors(layout);
  const std::int64_t q_width = s.heads * s.d;
  const bool unfused = !p.op.attention.flash, dropout = p.op.dropout > 0;
  TensorStore& tensors = stage_.tensors;
  const auto* qkv = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.qkv));
  auto* d_qkv = static_cast<bf16*>(tensors.make(p.mb, p.unit, t.d_qkv, s.tokens * s.qkv_width * kBf16, p.stream));
  const auto* d_o = static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.d_out));
  // An unfused op reads its forward's kept scores, not o and the log-sum-exp.
  const auto* o = unfused ? nullptr : static_cast<const bf16*>(tensors.get(p.mb, p.unit, t.out));
  auto* stats = static_cast<std::byte*>(tensors.get(p.mb, p.unit, t.stats));
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  const WeightTensor* sinks = sinks_of(p, unit, layout);
  bool accumulate_sinks = !p.binding.first_gradient;  // the first run stores, later runs add
  for (const EqualSequences& run : stage_.layout.sequence_runs(p.mb, s)) {
    const QkvOfRun<const bf16> in = qkv_of_run(qkv, s, run);
    const QkvOfRun<bf16> d_in = qkv_of_run(d_qkv, s, run);
    gpu::AttentionBackward call;
    call.attention = attention_.get();
    call.q = in.q, call.k = in.k, call.v = in.v, call.o = o ? o + run.first_token * q_width : nullptr;
    call.d_o = d_o + run.first_token * q_width;
    call.dq = d_in.q, call.dk = d_in.k, call.dv = d_in.v;
    call.dims = run_attention_dims(p.op, s, run);
    call.dropout = attention_dropout(p.op, p.mb, p.unit, run.first_token);
    if (sinks) {
      call.sinks = unit.params + sinks->offset;
      call.d_sinks = unit.bf16_grads() + sinks->offset;
      call.accumulate_sinks = accumulate_sinks;
      accumulate_sinks = true;
    }
    if (unfused) {
      call.unfused = unfused_.get();
      call.scores = gpu::unfused_scores_in(stats, call.dims, dropout);
      stats += gpu::unfused_scores_bytes(call.dims, dropout);
    } else {
      call.lse = reinterpret_cast<const float*>(stats) + s.heads * run.first_token;
    }
    launch_op(p.op, p.binding, call, p.stream);
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
  release_for_module_recompute(p, activation.role);
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
