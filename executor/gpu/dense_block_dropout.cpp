// Attention dropout's key of each fused-attention call, and hidden dropout's keys on this GPU: the draw of a residual's or the embedding's op (its probability, the run's seed,
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

// The rows are read off the embedding's layout whatever unit draws: a stage's residual stream holds the same rows
// under every unit's layout (a uniform plan has one; a per-layer plan's layouts each hold rows [g T, (g + 1) T) of
// the stage's micro-batch on its GPU g, strategies/per_layer/per_layer.hpp), and the embedding's layout is the one
// the part's TokenShare (first_sequence, input_first_row) describes. A layer's own layout would not do: a
// data-parallel layer's samples start where its block does, not where the embedding's do, and a TP layer beside a
// Ulysses embedding would count the Ulysses shard's first row twice.
gpu::AttentionDropout DenseBlock::attention_dropout(const Op& op, int mb, int unit, std::int64_t first_row) const {
  if (op.dropout == 0) return {};
  return {op.dropout, attention_dropout_seed(stage_.seed, iteration_, op.layer, mb, first_row, stage_.layout.me(),
                                             stage_.layout.layout(unit).tp_rank)};
}

std::vector<kernels::DropoutRun> DenseBlock::dropout_runs(int mb, bool sequence_sharded) const {
  const UnitLayout& layout = stage_.layout.layout(kEmbeddingUnit);
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
