// The residual stream of a dense layer: the norms that read it and the adds that write it. A unit's first norm
// reads the previous unit's output; its backward ends the unit's backward and hands the input gradient to the unit
// before it, through that unit's norm and (in a layer) through the residual stream. A post norm (Gemma-2 and 3)
// reads a branch and the residual adds its output: its output's gradient is the residual output's, which the
// stream still needs, and its input's gradient is the branch's, which the branch's linear reads.
#include "executor/gpu/dense_block.hpp"

#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "executor/gpu/kernel_launch.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {
constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;
}  // namespace

namespace {
// The residual of the layer that adds `norm`'s output as its branch (a post norm's), else nullptr.
const layer::Block* residual_adding_output(const layer::Block& norm, bool post_norms) {
  for (const layer::Block& block : layer::layer_blocks(false, false, post_norms))
    if (block.kind == layer::BlockKind::residual && block.branch == norm.output) return &block;
  return nullptr;
}
}  // namespace

bool DenseBlock::post_norms() const { return stage_.layout.scenario().model.post_norms; }

const bf16* DenseBlock::norm_input(const OpPass& p, const layer::Block& norm) {
  const Act reduced{norm.input, Form::reduced};  // a post norm's branch after its row-parallel linear's reduction
  if (stage_.tensors.has(p.mb, p.unit, reduced)) return static_cast<const bf16*>(stage_.tensors.get(p.mb, p.unit, reduced));
  return residual_stream(p, norm);
}

void DenseBlock::norm_forward(const OpPass& p) {
  if (p.binding.subject == OpRole::qk_norm) return qk_norm_forward(p);  // inside core attention, not on the stream
  const ParameterUnit& parameters = stage_.parameters.unit(p.unit);
  const WeightTensor& w = parameters.tensor(p.binding.subject);
  const layer::Block& block = this->block(p.binding.subject);
  const std::int64_t rows = p.op.rows, cols = p.op.cols;
  auto* y = static_cast<bf16*>(stage_.tensors.make(p.mb, p.unit, {block.output}, rows * cols * kBf16, p.stream));
  // LayerNorm keeps the mean beside rstd: one stats tensor of two rows of floats.
  const bool ln = p.op.normalization == Normalization::layernorm;
  auto* r = static_cast<float*>(
      stage_.tensors.make(p.mb, p.unit, {block.stats}, (ln ? 2 : 1) * rows * sizeof(float), p.stream));
  const WeightTensor* bias = parameters.find(p.binding.subject, WeightPart::bias);
  launch_op(p.op, p.binding,
            gpu::NormForward{p.op.normalization, norm_input(p, block), parameters.params + w.offset,
                             bias ? parameters.params + bias->offset : nullptr, y, ln ? r + rows : nullptr, r, rows,
                             cols},
            p.stream);
}

void DenseBlock::norm_backward(const OpPass& p) {
  if (p.binding.subject == OpRole::qk_norm) return qk_norm_backward(p);
  TensorStore& tensors = stage_.tensors;
  const int mb = p.mb, unit = p.unit;
  const ParameterUnit& parameters = stage_.parameters.unit(unit);
  const WeightTensor& w = parameters.tensor(p.binding.subject);
  const layer::Block& block = this->block(p.binding.subject);
  const std::int64_t rows = p.op.rows, cols = p.op.cols;
  const layer::Block* adding = residual_adding_output(block, post_norms());  // a post norm: the residual's gradient
  const Act d_reduced{adding ? adding->output : block.output, Form::gradient},
      d_full{block.output, Form::gradient_partial};
  const auto* dy = static_cast<const bf16*>(tensors.has(mb, unit, d_reduced) ? tensors.get(mb, unit, d_reduced)
                                                                             : tensors.get(mb, unit, d_full));
  // A norm inside the unit: its input gradient is the start of that tensor's gradient (the residual backward adds
  // the skip path's), or all of it when the norm backward adds the skip path's itself; a post norm's is its
  // branch's whole gradient.
  const Act dx_name{block.input, Form::gradient};
  const Act skip{adding ? Tensor::count : layer::residual_reading(block.input).output, Form::gradient};
  auto* dx = static_cast<bf16*>(tensors.make(mb, unit, dx_name, rows * cols * kBf16, p.stream));
  const auto* stats = static_cast<const float*>(tensors.get(mb, unit, {block.stats}));  // rstd (then the mean)
  const WeightTensor* bias = parameters.find(p.binding.subject, WeightPart::bias);
  launch_op(p.op, p.binding,
            gpu::NormBackward{p.op.normalization, dy, norm_input(p, block), parameters.params + w.offset,
                              p.op.normalization == Normalization::layernorm ? stats + rows : nullptr, stats,
                              p.op.fuses_residual ? static_cast<const bf16*>(tensors.get(mb, unit, skip)) : nullptr,
                              dx, p.scratch.norm_partials, parameters.grads.at(w.offset),
                              bias ? parameters.grads.at(bias->offset) : kernels::GradRef{},
                              /*accumulate=*/!p.binding.first_gradient, rows, cols},
            p.stream);
  if (p.op.fuses_residual) tensors.release(mb, unit, skip, p.stream);
  if (adding) return;  // the residual's output gradient stays: the skip path and the norm before it read it
  if (block.input != Tensor::input) {
    tensors.release(mb, unit, d_reduced, p.stream);
    tensors.release(mb, unit, d_full, p.stream);
    return;
  }
  // The unit's first norm: its backward ends; the input gradient goes to the unit before it, through its norm and
  // (in a layer) through the residual stream: the gradient of the residual reading the input.
  const int before = stage_.layout.previous_unit(unit, p.op.chunk);
  const Act to_norm{Tensor::output, Form::next_norm_gradient}, to_residual{Tensor::output, Form::next_residual_gradient};
  const Act arriving = stage_.layout.arriving_output_gradient();
  if (unit == kHeadUnit) {
    tensors.move(mb, unit, dx_name, before, arriving);
  } else if (p.op.fuses_residual) {  // dx is the whole gradient
    tensors.move(mb, unit, dx_name, before, before >= 0 ? arriving : to_norm);
  } else if (before >= 0) {
    tensors.move(mb, unit, dx_name, before, to_norm);
    tensors.move(mb, unit, skip, before, to_residual);
  } else {  // no residual op follows the chunk's first layer: add the residual stream's part here
    kernels::residual_add(dx, static_cast<const bf16*>(tensors.get(mb, unit, skip)), dx, rows * cols, p.stream);
    tensors.move(mb, unit, dx_name, before, to_norm);
  }
  tensors.release_slot(mb, unit, p.stream);
}

const bf16* DenseBlock::residual_stream(const OpPass& p, const layer::Block& residual) {
  const bool unit_input = residual.input == Tensor::input;
  return static_cast<const bf16*>(
      unit_input ? stage_.tensors.get(p.mb, stage_.layout.previous_unit(p.unit, p.op.chunk), {Tensor::output})
                 : stage_.tensors.get(p.mb, p.unit, {residual.input}));
}

void DenseBlock::residual_forward_done(const OpPass& p, const layer::Block& residual) {
  // Full recompute keeps only the layer's output until its backward runs the forward again.
  if (residual.output == Tensor::output && !p.op.recomputed &&
      stage_.layout.recompute_of(p.op.layer) == Recompute::full)
    stage_.tensors.release_slot(p.mb, p.unit, p.stream, {Tensor::output});
}

// The residual op states its rows and columns (the lowering's tokens_local x h of its unit's shapes); they must be
// the residual stream's rows here, its unit's layout's (a per-layer plan's layer, or the embedding or output layer
// beside it: the part strategy's shapes count whole samples per GPU, which a Ulysses or TP block holding part of a
// sample does not; 2026-11-29: they read past the rows beside a half-sample Ulysses edge).
std::int64_t DenseBlock::residual_elements(const OpPass& p) const {
  const lowering::RankShapes& shapes = stage_.layout.layout(p.unit).shapes;
  if (p.op.rows != shapes.tokens_local || p.op.cols != shapes.h)
    throw std::logic_error(fmt::format("executor: the residual op {} states {} x {} elements, its unit's buffers hold "
                                       "{} x {} (rows x hidden)",
                                       op_name(p.op), p.op.rows, p.op.cols, shapes.tokens_local, shapes.h));
  return p.op.rows * p.op.cols;
}

// output = input + branch (the branch after its TP reduction); with hidden dropout output = input + mask * branch /
// (1 - p), the mask drawn at the rows' places in the batch and kept for the backward.
void DenseBlock::residual_forward(const OpPass& p) {
  TensorStore& tensors = stage_.tensors;
  const std::int64_t count = residual_elements(p);
  const layer::Block& block = this->block(p.binding.subject);
  const Act reduced{block.branch, Form::reduced}, branch_out{block.branch};
  const Act branch = tensors.has(p.mb, p.unit, reduced) ? reduced : branch_out;
  auto* y = static_cast<bf16*>(tensors.make(p.mb, p.unit, {block.output}, count * kBf16, p.stream));
  gpu::Elementwise call{residual_stream(p, block), static_cast<const bf16*>(tensors.get(p.mb, p.unit, branch)), y,
                        count};
  std::vector<kernels::DropoutRun> runs;
  if (p.op.dropout > 0) {
    runs = dropout_runs(p.mb, /*sequence_sharded=*/true);
    auto* mask = static_cast<std::uint8_t*>(
        tensors.make(p.mb, p.unit, {block.output, Form::dropout_mask}, static_cast<std::size_t>(count), p.stream));
    call.dropout = {dropout_draw(p.op), mask, runs.data(), static_cast<int>(runs.size())};
    call.cols = p.op.cols;
  }
  launch_op(p.op, p.binding, call, p.stream);
  tensors.release(p.mb, p.unit, reduced, p.stream);
  tensors.release(p.mb, p.unit, branch_out, p.stream);
  residual_forward_done(p, block);
}

// The output's gradient is the branch's (linear_tensors reads it there); the skip path adds it to the input's. With
// hidden dropout the branch's gradient is the output's through the mask, a tensor of its own (the branch's gradient),
// and the output's stays for the skip path.
void DenseBlock::residual_backward(const OpPass& p) {
  TensorStore& tensors = stage_.tensors;
  const std::int64_t count = residual_elements(p);
  const layer::Block& block = this->block(p.binding.subject);
  const Act d_output{block.output, Form::gradient};
  // The unit's output gradient: through the next unit's norm + its stream; inside the unit: the norm reading this
  // output gave its part, the skip path of the next residual adds its output's gradient.
  const bool unit_output = block.output == Tensor::output;
  if (unit_output) tensors.move(p.mb, p.unit, {Tensor::output, Form::next_norm_gradient}, p.unit, d_output);
  const Act stream_part = unit_output ? Act{Tensor::output, Form::next_residual_gradient}
                                      : Act{layer::residual_reading(block.output).output, Form::gradient};
  const bool adds = !unit_output || tensors.has(p.mb, p.unit, stream_part);
  if (!adds && p.op.dropout == 0) return;
  auto* dy = static_cast<bf16*>(tensors.get(p.mb, p.unit, d_output));
  gpu::Elementwise call{dy, adds ? static_cast<const bf16*>(tensors.get(p.mb, p.unit, stream_part)) : nullptr, dy,
                        count};
  const Act mask{block.output, Form::dropout_mask};
  if (p.op.dropout > 0) {
    call.dropout.draw.probability = p.op.dropout;
    call.dropout.mask = static_cast<std::uint8_t*>(tensors.get(p.mb, p.unit, mask));
    call.cols = p.op.cols;
    call.dropped = static_cast<bf16*>(tensors.make(p.mb, p.unit, {block.branch, Form::gradient}, count * kBf16, p.stream));
  }
  launch_op(p.op, p.binding, call, p.stream);
  if (adds) tensors.release(p.mb, p.unit, stream_part, p.stream);
  if (p.op.dropout > 0) tensors.release(p.mb, p.unit, mask, p.stream);
}

}  // namespace twin::exec
