// What a GPT-style model adds to the dense block: linear biases and learned absolute positions. Both run inside the
// op whose weights they belong to (a bias inside its linear's forward and weight-gradient GEMM ops, positions inside
// the embedding's ops), so the op graph and its traces are the same as a Llama-style model's.
//
// Megatron adds a row-parallel linear's bias after the TP reduction on every TP rank, and the position embedding
// after the vocabulary-parallel embedding's reduction. Here TP rank 0 adds either before the reduction, into its
// partial sum, so the reduced sum holds it once with no op of its own; the gradients are Megatron's: a
// column-parallel bias's from its own output columns, a replicated bias's or the positions' from the rows this rank
// holds outside TP regions (all of them without SP; its 1/tp of them under SP, summed over TP with the norms').
#include <algorithm>

#include "executor/gpu/dense_block.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

void DenseBlock::add_linear_bias(const OpPass& p, bf16* out, std::int64_t rows, std::int64_t cols) {
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  const WeightTensor* bias = unit.find(p.binding.subject, WeightPart::bias);
  if (!bias) return;
  if (bias->tp_replicated && stage_.layout.layout(p.unit).tp_rank != 0) return;  // added once, into the sum
  kernels::bias_add(out, unit.params + bias->offset, rows, cols, p.stream);
}

void DenseBlock::linear_bias_grad(const OpPass& p, const bf16* d_output_full, std::int64_t rows, std::int64_t cols) {
  const ParameterUnit& unit = stage_.parameters.unit(p.unit);
  const WeightTensor* bias = unit.find(p.binding.subject, WeightPart::bias);
  if (!bias) return;
  const UnitLayout& layout = stage_.layout.layout(p.unit);
  const bf16* dy = d_output_full;
  if (bias->tp_replicated && layout.shapes.sp) {  // this rank's rows of the gathered gradient
    rows = layout.shapes.tokens_local;
    dy += layout.tp_rank * rows * cols;
  }
  kernels::bias_grad(dy, p.scratch.norm_partials, unit.grads + bias->offset, !p.binding.first_gradient, rows, cols,
                     p.stream);
}

// The embedding's rows [first_row, end_row) as runs of consecutive positions (RoPE's runs, cut to the window).
std::vector<kernels::PositionRun> DenseBlock::position_runs(int mb, const lowering::RankShapes& s,
                                                            std::int64_t first_row, std::int64_t end_row) const {
  std::vector<kernels::PositionRun> out;
  for (const RopeRun& run : rope_runs(mb, s)) {
    const std::int64_t begin = std::max(run.first_token, first_row);
    const std::int64_t end = std::min(run.first_token + run.tokens, end_row);
    if (end > begin)
      out.push_back({begin, end - begin, run.period, (begin - run.first_token) % run.period, run.first_position});
  }
  return out;
}

}  // namespace twin::exec
