// Hidden dropout's keys on this GPU: the draw of a residual's or the embedding's op (its probability, the run's seed,
// the step's and site's Philox subsequence) and the rows of its tensor as runs of the batch's tokens
// (executor/dropout_key.hpp), so that each element's mask bit is the one-GPU run's whatever the layout.
#include "executor/gpu/dense_block.hpp"

#include "executor/dropout_key.hpp"

namespace twin::exec {

bool DenseBlock::branch_has_own_gradient() const {
  return post_norms() || stage_.layout.scenario().model.hidden_dropout > 0;
}

kernels::DropoutDraw DenseBlock::dropout_draw(const Op& op) const {
  return {op.dropout, stage_.seed, dropout_subsequence(iteration_, op.layer, op.role)};
}

std::vector<kernels::DropoutRun> DenseBlock::dropout_runs(int mb, int unit, bool sequence_sharded) const {
  const UnitLayout& layout = stage_.layout.layout(unit);
  const lowering::RankShapes& s = layout.shapes;
  const bool sliced = sequence_sharded && s.sp;  // this TP rank's slice of the rows
  MicroBatchRows rows;
  rows.first_sequence = stage_.first_sequence + mb * stage_.micro_batch_stride;
  rows.seq_length = stage_.layout.scenario().training.seq_length;
  rows.first_row = stage_.input_first_row;
  rows.sequences = s.b;
  rows.local_length = s.s;
  rows.context_parallel_size = s.cp;
  rows.context_parallel_rank = stage_.layout.me().cp;
  rows.window_first = sliced ? layout.tp_rank * s.tokens_local : 0;
  rows.window_rows = sequence_sharded ? s.tokens_local : s.tokens;
  std::vector<kernels::DropoutRun> out;
  for (const BatchRowRun& run : batch_row_runs(rows)) out.push_back({run.first_row, run.rows, run.first_token});
  return out;
}

}  // namespace twin::exec
