// Where each element of a hidden dropout lies in the step's batch, so that its mask bit (gpu/kernels.hpp: cuRAND's
// Philox at the element's batch index) is the same whatever the GPUs' layout: which Philox subsequence a dropout
// site of a step draws from, and which of the batch's tokens the rows of a GPU's tensor are. Pure CPU code
// (tests/executor/dropout_key_test.cpp); executor/gpu/dense_block_dropout.cpp hands both to the kernels.
#pragma once
#include <cstdint>
#include <vector>

#include "core/op.hpp"
#include "strategies/rank_layout.hpp"

namespace twin::exec {

// The subsequence of a dropout site in step `step`: the step in the high 32 bits, the site in the low: 0 the
// embedding's output, 1 + 2 l layer l's attention residual, 2 + 2 l its MLP residual. A fresh mask at every site of
// every step, as Megatron draws one; a recomputed forward (full recompute) draws the same one again. Throws
// std::logic_error for a role that applies no hidden dropout, a negative step or a layer outside [0, 2^31 - 1).
std::uint64_t dropout_subsequence(int step, int layer, OpRole role);

// Rows [first_row, first_row + rows) of a GPU's tensor are the batch's tokens first_token, first_token + 1, ...: the
// batch's sequences one after another, token = sequence * seq_length + position.
struct BatchRowRun {
  std::int64_t first_row = 0, rows = 0, first_token = 0;
  bool operator==(const BatchRowRun&) const = default;
};

// One micro-batch's rows on one GPU. Its `sequences` sequences (the step's first_sequence on) hold local_length rows
// each here (seq_length / context_parallel_size; under context parallelism the chunks r and 2cp-1-r of 2cp, one after
// the other, Megatron's load-balanced split), their rows beginning first_row rows into the first sequence (a Ulysses
// shard's start; 0 else). The tensor holds rows [window_first, window_first + window_rows) of those (a sequence-
// parallel tensor: its TP rank's slice; a replicated one: all of them).
struct MicroBatchRows {
  std::int64_t first_sequence = 0;
  std::int64_t seq_length = 0;
  std::int64_t first_row = 0;
  std::int64_t sequences = 0, local_length = 0;
  int context_parallel_size = 1, context_parallel_rank = 0;
  std::int64_t window_first = 0, window_rows = 0;
};
// The tensor's rows as runs of consecutive batch tokens, in row order, covering [0, window_rows). Throws
// std::invalid_argument where the window is not inside the micro-batch's rows or a CP split is not in two chunks.
std::vector<BatchRowRun> batch_row_runs(const MicroBatchRows& rows);

// The Philox seed of one fused-attention call's dropout (cuDNN's RNG node, gpu/attention.hpp): a hash of the run's
// seed, the step, the layer, the micro-batch, the call's first row among the micro-batch's rows here and the GPU's
// coordinates in its part (`at`, with `unit_tp_rank`, its rank among the GPUs of the unit's own layout). A forward,
// its recompute and its backward draw one mask; every other call, GPU and step its own. Unlike hidden dropout's, the
// mask does not follow an element across layouts: cuDNN keys it by the element's place in the call's scores, as
// Megatron draws attention dropout from a generator of each TP rank's own.
std::int64_t attention_dropout_seed(std::uint64_t seed, int step, int layer, int micro_batch, std::int64_t first_row,
                                    const RankCoordinates& at, int unit_tp_rank);

}  // namespace twin::exec
