// The ends of a stage: the vocab-parallel embedding and cross-entropy (one pass for each shard's max and sum of
// exponentials; all-reduce max, rescale, all-reduce sum, loss), as Megatron-LM's vocab-parallel layers run them.
#include "executor/gpu/dense_block.hpp"

#include "executor/gpu/kernel_launch.hpp"
#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {
namespace {
constexpr std::size_t kBf16 = sizeof(bf16);
using layer::Tensor;
}  // namespace

const std::int32_t* DenseBlock::inputs(int mb) const {
  return tokens_ + mb * (stage_.layout.input_tokens() + stage_.layout.target_tokens());
}

const std::int32_t* DenseBlock::targets(int mb) const { return inputs(mb) + stage_.layout.input_tokens(); }

void DenseBlock::embedding_forward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(kEmbeddingUnit);
  const std::int64_t tokens = layout.shapes.tokens, h = layout.shapes.h, vocab_l = layout.shapes.vocab;
  const ParameterUnit& unit = stage_.parameters.unit(kEmbeddingUnit);
  const WeightTensor& table = unit.tensor(OpRole::embedding);
  auto* out = static_cast<bf16*>(stage_.tensors.make(p.mb, kEmbeddingUnit, {Tensor::embedded}, tokens * h * kBf16,
                                                     p.stream));
  // Learned positions: TP rank 0 adds them to every row before the TP reduction (dense_block_gpt.cpp).
  const WeightTensor* positions = unit.find(OpRole::embedding, WeightPart::positions);
  const bool adds_positions = positions && layout.tp_rank == 0;
  const std::vector<kernels::PositionRun> runs =
      adds_positions ? position_runs(p.mb, layout.shapes, 0, tokens) : std::vector<kernels::PositionRun>();
  gpu::EmbeddingForward call{inputs(p.mb), unit.params + table.offset, out, tokens, h, layout.tp_rank * vocab_l,
                             vocab_l, adds_positions ? unit.params + positions->offset : nullptr, runs.data(),
                             static_cast<int>(runs.size())};
  // Hidden dropout on every row of the lookup, before the TP reduction: each TP rank draws the same mask (the rows'
  // places in the batch), so the reduced sum is dropped out as Megatron drops out the embedding's output.
  std::vector<kernels::DropoutRun> dropout_rows;
  if (p.op.dropout > 0) {
    dropout_rows = dropout_runs(p.mb, /*sequence_sharded=*/false);
    auto* mask = static_cast<std::uint8_t*>(stage_.tensors.make(
        p.mb, kEmbeddingUnit, {Tensor::embedded, Form::dropout_mask}, static_cast<std::size_t>(tokens * h), p.stream));
    call.dropout = {dropout_draw(p.op), mask, dropout_rows.data(), static_cast<int>(dropout_rows.size())};
  }
  launch_op(p.op, p.binding, call, p.stream);
  if (layout.shapes.tp == 1)
    stage_.tensors.alias(p.mb, kEmbeddingUnit, {Tensor::output}, kEmbeddingUnit, {Tensor::embedded});
}

void DenseBlock::embedding_backward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(kEmbeddingUnit);
  const std::int64_t tokens = layout.shapes.tokens, h = layout.shapes.h, vocab_l = layout.shapes.vocab;
  const ParameterUnit& unit = stage_.parameters.unit(kEmbeddingUnit);
  const WeightTensor& table = unit.tensor(OpRole::embedding);
  TensorStore& tensors = stage_.tensors;
  const Act gathered{Tensor::output, Form::gradient_gathered}, from_norm{Tensor::output, Form::next_norm_gradient};
  auto* dy = static_cast<bf16*>(tensors.has(p.mb, kEmbeddingUnit, gathered) ? tensors.get(p.mb, kEmbeddingUnit, gathered)
                                                                             : tensors.get(p.mb, kEmbeddingUnit, from_norm));
  // The step's first embedding backward starts the table's gradient from zeros: rows no token of the step names
  // keep them. Later micro-batches add to it, as the other weights' gradients do. Learned positions take the rows
  // this rank holds outside TP regions (under SP its slice of the gathered gradient).
  gpu::EmbeddingBackward call{inputs(p.mb), dy, unit.grads.at(table.offset), embedding_workspace_,
                              embedding_workspace_bytes_, p.binding.first_gradient, tokens, h,
                              layout.tp_rank * vocab_l, vocab_l};
  std::vector<kernels::PositionRun> runs;
  if (const WeightTensor* positions = unit.find(OpRole::embedding, WeightPart::positions)) {
    const std::int64_t first = layout.shapes.sp ? layout.tp_rank * layout.shapes.tokens_local : 0;
    runs = position_runs(p.mb, layout.shapes, first, layout.shapes.sp ? first + layout.shapes.tokens_local : tokens);
    call.position_grad = unit.grads.at(positions->offset);
    call.starts_position_gradient = p.binding.first_position_gradient;
    call.position_dy = dy;
    call.position_rows = positions->rows;
    call.position_runs = runs.data();
    call.position_run_count = static_cast<int>(runs.size());
  }
  if (p.op.dropout > 0) {  // the gradient through the mask, in place: nothing else reads dy
    call.dropout.draw.probability = p.op.dropout;
    call.dropout.mask =
        static_cast<std::uint8_t*>(tensors.get(p.mb, kEmbeddingUnit, {Tensor::embedded, Form::dropout_mask}));
    call.dropped_dy = dy;
  }
  launch_op(p.op, p.binding, call, p.stream);
  tensors.release_slot(p.mb, kEmbeddingUnit, p.stream);
}

// The cap a loss op runs with: the op says whether its logits are capped (Op::softcapped_logits), the model at what
// (Gemma-2's final_logit_softcapping), as calibration's bench takes them. Each vocabulary shard caps its own logits
// inside the loss kernels, so a split vocabulary needs no other communication.
float DenseBlock::logit_softcap(const Op& op) const {
  if (!op.softcapped_logits) return 0;
  const double cap = stage_.layout.scenario().model.final_logit_softcap;
  if (cap <= 0) throw std::logic_error("executor: a loss op with capped logits in a model without a cap");
  return static_cast<float>(cap);
}

void DenseBlock::loss_forward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(kHeadUnit);
  const std::int64_t tokens = layout.shapes.tokens, vocab_l = layout.shapes.vocab;
  TensorStore& tensors = stage_.tensors;
  const auto floats = [&](Tensor name) {
    return static_cast<float*>(tensors.make(p.mb, kHeadUnit, {name}, tokens * sizeof(float), p.stream));
  };
  // The vocabulary whole on this GPU: the loss follows the statistics at once (split over TP: after loss_reduce).
  const bool whole = layout.shapes.tp == 1;
  gpu::LossForward call{static_cast<bf16*>(tensors.get(p.mb, kHeadUnit, {Tensor::logits})), targets(p.mb),
                        floats(Tensor::row_max), floats(Tensor::sum_exp), floats(Tensor::target_logit),
                        whole ? floats(Tensor::token_loss) : nullptr, whole ? loss_sum_ : nullptr, tokens,
                        vocab_l, layout.tp_rank * vocab_l, logit_softcap(p.op)};
  // Unfused (Megatron's passes over an fp32 copy, core/unfused_loss.hpp): the copy keeps the softmax for the
  // backward and the bf16 logits go, as the memory model counts (core/layer.cpp). The plan check runs it at TP 1.
  if (p.op.unfused_loss) {
    if (!whole) throw std::logic_error("executor: an unfused loss over a vocabulary split over TP");
    call.fp32_logits = static_cast<float*>(
        tensors.make(p.mb, kHeadUnit, {Tensor::fp32_logits}, tokens * vocab_l * sizeof(float), p.stream));
  }
  launch_op(p.op, p.binding, call, p.stream);
  if (p.op.unfused_loss) tensors.release(p.mb, kHeadUnit, {Tensor::logits}, p.stream);
  if (whole) tensors.alias(p.mb, kHeadUnit, {Tensor::global_row_max}, kHeadUnit, {Tensor::row_max});
}

// Megatron's order: all-reduce the max; each shard's sum rescaled to it; all-reduce the sums; the loss.
void DenseBlock::loss_reduce(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(kHeadUnit);
  const std::int64_t tokens = layout.shapes.tokens;
  TensorStore& tensors = stage_.tensors;
  const auto existing = [&](Tensor name) { return static_cast<float*>(tensors.get(p.mb, kHeadUnit, {name})); };
  float* global_max = static_cast<float*>(
      tensors.make(p.mb, kHeadUnit, {Tensor::global_row_max}, tokens * sizeof(float), p.stream));
  float* sum_exp = existing(Tensor::sum_exp);
  float* target_logit = existing(Tensor::target_logit);
  TWIN_NCCL_CHECK(ncclAllReduce(existing(Tensor::row_max), global_max, tokens, ncclFloat32, ncclMax, layout.tensor,
                                p.stream));
  kernels::cross_entropy_rescale_sum_exp(existing(Tensor::row_max), global_max, sum_exp, tokens, p.stream);
  TWIN_NCCL_CHECK(ncclGroupStart());
  TWIN_NCCL_CHECK(ncclAllReduce(sum_exp, sum_exp, tokens, ncclFloat32, ncclSum, layout.tensor, p.stream));
  TWIN_NCCL_CHECK(ncclAllReduce(target_logit, target_logit, tokens, ncclFloat32, ncclSum, layout.tensor, p.stream));
  TWIN_NCCL_CHECK(ncclGroupEnd());
  auto* token_loss = static_cast<float*>(
      tensors.make(p.mb, kHeadUnit, {Tensor::token_loss}, tokens * sizeof(float), p.stream));
  kernels::cross_entropy_loss(global_max, sum_exp, target_logit, token_loss, tokens, p.stream);
  if (layout.tp_rank == 0) kernels::add_sum_f32(token_loss, tokens, loss_sum_, p.stream);
}

// The mean over every token of the step (all its parts); the gradient is written over the logits: it is the output
// projection's output gradient.
void DenseBlock::loss_backward(const OpPass& p) {
  const UnitLayout& layout = stage_.layout.layout(kHeadUnit);
  const std::int64_t tokens = layout.shapes.tokens, vocab_l = layout.shapes.vocab;
  TensorStore& tensors = stage_.tensors;
  const auto existing = [&](Tensor name) { return static_cast<float*>(tensors.get(p.mb, kHeadUnit, {name})); };
  const float scale = static_cast<float>(1.0 / static_cast<double>(stage_.loss_tokens));
  if (p.op.unfused_loss) {  // the fp32 softmax becomes the gradient, cast into a bf16 tensor of its own
    auto* d_logits = static_cast<bf16*>(tensors.make(p.mb, kHeadUnit, {Tensor::logits, Form::gradient},
                                                     tokens * vocab_l * sizeof(bf16), p.stream));
    gpu::LossBackward call{nullptr, nullptr, nullptr, targets(p.mb), d_logits, scale, tokens, vocab_l,
                           layout.tp_rank * vocab_l, logit_softcap(p.op)};
    call.fp32_softmax = static_cast<float*>(tensors.get(p.mb, kHeadUnit, {Tensor::fp32_logits}));
    launch_op(p.op, p.binding, call, p.stream);
    for (Tensor done : {Tensor::fp32_logits, Tensor::global_row_max, Tensor::row_max, Tensor::sum_exp,
                        Tensor::target_logit, Tensor::token_loss})
      tensors.release(p.mb, kHeadUnit, {done}, p.stream);
    return;
  }
  auto* logits = static_cast<bf16*>(tensors.get(p.mb, kHeadUnit, {Tensor::logits}));
  launch_op(p.op, p.binding,
            gpu::LossBackward{logits, existing(Tensor::global_row_max), existing(Tensor::sum_exp), targets(p.mb),
                              logits, scale, tokens, vocab_l, layout.tp_rank * vocab_l, logit_softcap(p.op)},
            p.stream);
  for (Tensor done : {Tensor::global_row_max, Tensor::row_max, Tensor::sum_exp, Tensor::target_logit,
                      Tensor::token_loss})
    tensors.release(p.mb, kHeadUnit, {done}, p.stream);
  tensors.alias(p.mb, kHeadUnit, {Tensor::logits, Form::gradient}, kHeadUnit, {Tensor::logits});
}

}  // namespace twin::exec
