// The ops between the linears of a layer: RoPE, attention and the MLP activation. RoPE and attention run per
// run of equal sequences of a micro-batch's rows (one run unless rows pack several sequences: hot switching).
#include <array>
#include <stdexcept>
#include <vector>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"
#include "core/layer.hpp"
#include "executor/gpu/kernel_launch.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "strategies/rank_layout.hpp"

namespace twin::exec {
namespace {

constexpr std::size_t kBf16 = sizeof(bf16);

}  // namespace

std::vector<StageRuntime::SequenceRun> StageRuntime::sequence_runs(int mb, const lowering::RankShapes& shapes) const {
  const std::int64_t rows = shapes.b, length = shapes.s;
  if (plan_part_.packs.empty()) return {{0, rows, length}};
  std::vector<SequenceRun> runs;
  const std::int64_t first_row =
      static_cast<std::int64_t>(me_.dp) * strategy_.num_micro_batches * rows + static_cast<std::int64_t>(mb) * rows;
  for (std::int64_t row = 0; row < rows; ++row) {
    std::vector<std::int64_t> lengths = plan_part_.packs.at(static_cast<std::size_t>(first_row + row));
    std::int64_t used = 0;
    for (std::int64_t l : lengths) used += l;
    if (used > length) throw std::logic_error("executor: a pack longer than its row");
    if (used < length) lengths.push_back(length - used);  // the unfilled end: one more sequence
    std::int64_t token = row * length;
    for (std::int64_t l : lengths) {
      if (!runs.empty() && runs.back().length == l && runs.back().first_token + runs.back().sequences * l == token)
        ++runs.back().sequences;
      else
        runs.push_back({token, 1, l});
      token += l;
    }
  }
  return runs;
}

// Attention, RoPE and the MLP activation: the ops between the linears of a layer. RoPE and attention run
// per run of equal sequences (one run unless rows pack several sequences).
void StageRuntime::between_linears(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream) {
  const UnitLayout& layout = this->layout(unit);
  const lowering::RankShapes& s = layout.shapes;
  const std::int64_t tokens = s.tokens;
  const std::int64_t q_width = s.heads * s.d, kv_width = s.groups * s.d;
  const auto dims = [&](const SequenceRun& run) {
    return kernels::AttentionDims{run.sequences, run.length, static_cast<int>(s.heads), static_cast<int>(s.groups),
                                  static_cast<int>(s.d), s.qkv_width, s.qkv_width, true};
  };
  // RoPE's runs: rows rotated as positions first_position + (row % period). Under context parallelism a rank's
  // rows of a sequence are two chunks, r and 2cp-1-r of 2cp, each at its place in the whole sequence.
  struct RopeRun {
    std::int64_t first_token, tokens, period, first_position;
  };
  const auto rope_runs = [&] {
    std::vector<RopeRun> runs;
    if (s.cp == 1) {
      for (const SequenceRun& run : sequence_runs(mb, s))
        runs.push_back({run.first_token, run.sequences * run.length, run.length, 0});
      return runs;
    }
    const std::int64_t chunk = s.s / 2;
    const std::array<int, 2> chunks = context_chunks_of(me_.cp, s.cp);
    for (std::int64_t row = 0; row < s.b; ++row)
      for (std::size_t half = 0; half < chunks.size(); ++half)
        runs.push_back({row * s.s + static_cast<std::int64_t>(half) * chunk, chunk, chunk, chunks[half] * chunk});
    return runs;
  };
  const auto rope = [&](const RopeRun& run) {
    return kernels::RopeShape{run.tokens, run.period, static_cast<int>(s.heads), static_cast<int>(s.groups),
                              static_cast<int>(s.d), s.qkv_width, s.qkv_width};
  };
  const auto rope_table = [&](const RopeRun& run) { return rope_table_ + run.first_position * (s.d / 2); };
  const layer::Block& attention = layer::block_of(OpRole::core_attention);
  const layer::Block& activation = layer::block_of(OpRole::activation);
  // A Ulysses layer's attention works on its tensors' heads layout (op_actions_ulysses.cpp): their gathered forms.
  const Form value = layout.ulysses ? Form::gathered : Form::value;
  const Form gradient = layout.ulysses ? Form::gradient_gathered : Form::gradient;
  const Act qkv_name{attention.input, value}, out_name{attention.output, value}, stats_name{attention.stats};
  const Act d_qkv_name{attention.input, gradient}, d_out_name{attention.output, gradient};
  const Act act_in{activation.input}, act_out{activation.output};
  const Act d_act_in{activation.input, Form::gradient}, d_act_out{activation.output, Form::gradient};
  switch (b.action) {
    case Action::rope_forward: {
      auto* qkv = static_cast<bf16*>(tensors_.get(mb, unit, qkv_name));
      for (const RopeRun& run : rope_runs()) {
        bf16* q = qkv + run.first_token * s.qkv_width;
        launch_op(op, b, gpu::RopeForward{q, q + q_width, rope_table(run), rope(run)}, stream);
      }
      return;
    }
    case Action::rope_backward: {
      auto* d_qkv = static_cast<bf16*>(tensors_.get(mb, unit, d_qkv_name));
      for (const RopeRun& run : rope_runs()) {
        bf16* dq = d_qkv + run.first_token * s.qkv_width;
        launch_op(op, b, gpu::RopeBackward{dq, dq + q_width, rope_table(run), rope(run)}, stream);
      }
      return;
    }
    case Action::attention_forward: {
      const auto* qkv = static_cast<const bf16*>(tensors_.get(mb, unit, qkv_name));
      auto* o = static_cast<bf16*>(tensors_.make(mb, unit, out_name, tokens * q_width * kBf16, stream));
      // lse is [sequences, heads, length] per run: a run's block starts at heads * its first token.
      auto* lse = static_cast<float*>(tensors_.make(mb, unit, stats_name, s.b * s.heads * s.s * sizeof(float), stream));
      for (const SequenceRun& run : sequence_runs(mb, s)) {
        const bf16* q = qkv + run.first_token * s.qkv_width;
        launch_op(op, b,
                  gpu::AttentionForward{attention_.get(), q, q + q_width, q + q_width + kv_width,
                                        o + run.first_token * q_width, lse + s.heads * run.first_token, dims(run)},
                  stream);
      }
      return;
    }
    case Action::attention_backward: {
      const auto* qkv = static_cast<const bf16*>(tensors_.get(mb, unit, qkv_name));
      auto* d_qkv = static_cast<bf16*>(tensors_.make(mb, unit, d_qkv_name, tokens * s.qkv_width * kBf16, stream));
      const auto* o = static_cast<const bf16*>(tensors_.get(mb, unit, out_name));
      const auto* d_o = static_cast<const bf16*>(tensors_.get(mb, unit, d_out_name));
      const auto* lse = static_cast<const float*>(tensors_.get(mb, unit, stats_name));
      for (const SequenceRun& run : sequence_runs(mb, s)) {
        const std::int64_t row = run.first_token * s.qkv_width;
        const bf16* q = qkv + row;
        bf16* dq = d_qkv + row;
        launch_op(op, b,
                  gpu::AttentionBackward{attention_.get(), q, q + q_width, q + q_width + kv_width,
                                         o + run.first_token * q_width, d_o + run.first_token * q_width,
                                         lse + s.heads * run.first_token, dq, dq + q_width, dq + q_width + kv_width,
                                         dims(run)},
                  stream);
      }
      for (Act done : {qkv_name, out_name, stats_name, d_out_name}) tensors_.release(mb, unit, done, stream);
      return;
    }
    case Action::activation_forward: {
      auto* act = static_cast<bf16*>(tensors_.make(mb, unit, act_out, op.rows * op.cols * kBf16, stream));
      const auto* fc1 = static_cast<const bf16*>(tensors_.get(mb, unit, act_in));
      launch_op(op, b, gpu::ActivationForward{op.gated_activation, fc1, act, op.rows, op.cols}, stream);
      return;
    }
    case Action::activation_backward: {
      const std::int64_t width = (op.gated_activation ? 2 : 1) * op.cols;
      auto* d_fc1 = static_cast<bf16*>(tensors_.make(mb, unit, d_act_in, op.rows * width * kBf16, stream));
      const auto* fc1 = static_cast<const bf16*>(tensors_.get(mb, unit, act_in));
      const auto* d_act = static_cast<const bf16*>(tensors_.get(mb, unit, d_act_out));
      launch_op(op, b, gpu::ActivationBackward{op.gated_activation, fc1, d_act, d_fc1, op.rows, op.cols}, stream);
      for (Act done : {act_in, d_act_out}) tensors_.release(mb, unit, done, stream);
      return;
    }
    default: throw std::logic_error("executor: not an attention-block action");
  }
}

}  // namespace twin::exec
