// What a GPT-style model adds to the dense block: linear biases and learned absolute positions. Both run inside the
// op whose weights they belong to (a bias inside its linear's forward and weight-gradient GEMMs, in cuBLASLt's
// epilogue as Megatron's Transformer Engine runs it; positions inside the embedding's ops), so the op graph and its
// traces are the same as a Llama-style model's.
//
// Megatron adds a row-parallel linear's bias after the TP reduction on every TP rank, and the position embedding
// after the vocabulary-parallel embedding's reduction. Here TP rank 0 adds either before the reduction, into its
// partial sum, so the reduced sum holds it once with no op of its own; the gradients are Megatron's: a
// column-parallel bias's from its own output columns, a replicated bias's or the positions' from the rows this rank
// holds outside TP regions (all of them without SP; its 1/tp of them under SP, summed over TP with the norms').
#include <algorithm>
#include <cstdint>

#include "executor/gpu/dense_block.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

// The bias of the op's linear in its unit, or nullptr (a linear without one).
const WeightTensor* DenseBlock::linear_bias_tensor(const OpPass& p) {
  return stage_.parameters.unit(p.unit).find(p.binding.subject, WeightPart::bias);
}

// The bias this rank adds to the linear's output, or nullptr: none, or a replicated one that TP rank 0 adds.
bf16* DenseBlock::forward_bias(const OpPass& p) {
  const WeightTensor* bias = linear_bias_tensor(p);
  if (!bias) return nullptr;
  if (bias->tp_replicated && stage_.layout.layout(p.unit).tp_rank != 0) return nullptr;  // added once, into the sum
  return stage_.parameters.unit(p.unit).params + bias->offset;
}

// Where the weight-gradient GEMM's epilogue writes the bias's gradient (the gradient itself, or the stream's scratch
// when a later micro-batch adds to it; in the weight's gradient type, as the GEMM's output), setting the problem's
// epilogue; unset, problem unchanged, where the GEMM cannot: no bias; a replicated bias under SP, whose gradient sums
// only this rank's rows of the gathered gradient the GEMM reduces whole; or a layout cuBLASLt has no such algorithm
// for (then the column-sum kernel runs).
kernels::GradRef DenseBlock::fused_bias_grad(const OpPass& p, MatmulProblem& problem, bool output_grad_is_a) {
  const WeightTensor* bias = linear_bias_tensor(p);
  if (!bias || (bias->tp_replicated && stage_.layout.layout(p.unit).shapes.sp)) return {};
  const GradientTarget gradients = gradient_target(p);
  const kernels::GradRef target =
      gradients.store ? gradients.bias : kernels::GradRef{p.scratch.bias_grad, gradients.weight.type};
  MatmulProblem fused = problem;
  fused.epilogue = output_grad_is_a ? MatmulEpilogue::bias_grad_of_a : MatmulEpilogue::bias_grad_of_b;
  if (!epilogue_vector_aligned(target.data) || !p.scratch.matmul->supports(fused)) return {};
  problem = fused;
  return target;
}

// A later micro-batch's bias gradient, written to the scratch by the epilogue, added to the gradient (rounded as the
// unfused path rounds it).
void DenseBlock::finish_fused_bias_grad(const OpPass& p, std::int64_t cols) {
  const GradientTarget gradients = gradient_target(p);
  if (gradients.store) return;
  kernels::add_bias_grad_sums(p.scratch.bias_grad, p.scratch.norm_partials, gradients.bias, cols, p.stream);
}

void DenseBlock::linear_bias_grad(const OpPass& p, const bf16* d_output_full, std::int64_t rows, std::int64_t cols) {
  const WeightTensor* bias = linear_bias_tensor(p);
  if (!bias) return;
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const bf16* dy = d_output_full;
  if (bias->tp_replicated && layout.shapes.sp) {  // this rank's rows of the gathered gradient
    rows = layout.shapes.tokens_local;
    dy += layout.tp_rank * rows * cols;
  }
  const GradientTarget gradients = gradient_target(p);
  kernels::bias_grad(dy, p.scratch.norm_partials, gradients.bias, !gradients.store, rows, cols, p.stream);
}

// The embedding's rows [first_row, end_row) as runs of consecutive positions (RoPE's runs, cut to the window). Its
// row i is row input_first_row + i of the shapes' sequences (beside a Ulysses layer a shard of them: its positions
// start where the shard does).
std::vector<kernels::PositionRun> DenseBlock::position_runs(int mb, const lowering::RankShapes& s,
                                                            std::int64_t first_row, std::int64_t end_row) const {
  const std::int64_t shift = stage_.input_first_row;
  std::vector<kernels::PositionRun> out;
  for (const RopeRun& run : rope_runs(mb, s)) {
    const std::int64_t begin = std::max(run.first_token, first_row + shift);
    const std::int64_t end = std::min(run.first_token + run.tokens, end_row + shift);
    if (end > begin)
      out.push_back(
          {begin - shift, end - begin, run.period, (begin - run.first_token) % run.period, run.first_position});
  }
  return out;
}

}  // namespace twin::exec
