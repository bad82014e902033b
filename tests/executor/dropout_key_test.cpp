// Hidden dropout's keys (executor/dropout_key.hpp): every site of every step its own Philox subsequence, and a GPU's
// rows as runs of the batch's tokens, the same tokens whatever the layout (one GPU, SP's slices, CP's chunks, a
// Ulysses shard's rows), so that the kernels draw each element's bit as the one-GPU run does.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <vector>

#include "executor/dropout_key.hpp"

namespace twin::exec {
namespace {

TEST(DropoutKey, EverySiteOfEveryStepHasItsOwnSubsequence) {
  std::set<std::uint64_t> seen;
  int sites = 0;
  for (int step = 0; step < 3; ++step) {
    seen.insert(dropout_subsequence(step, -1, OpRole::embedding));
    ++sites;
    for (int layer = 0; layer < 40; ++layer)
      for (OpRole role : {OpRole::attention_residual, OpRole::mlp_residual}) {
        seen.insert(dropout_subsequence(step, layer, role));
        ++sites;
      }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), sites);
  EXPECT_EQ(dropout_subsequence(2, 0, OpRole::attention_residual), (std::uint64_t{2} << 32) | 1);
  EXPECT_EQ(dropout_subsequence(2, 0, OpRole::mlp_residual), (std::uint64_t{2} << 32) | 2);
  EXPECT_THROW(dropout_subsequence(0, 0, OpRole::fc1), std::logic_error);
  EXPECT_THROW(dropout_subsequence(-1, 0, OpRole::mlp_residual), std::logic_error);
  EXPECT_THROW(dropout_subsequence(0, -1, OpRole::mlp_residual), std::logic_error);
}

// The batch token of every row of a layout's tensor, from its runs.
std::vector<std::int64_t> tokens_of(const MicroBatchRows& rows) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows.window_rows), -1);
  std::int64_t covered = 0;
  for (const BatchRowRun& run : batch_row_runs(rows)) {
    EXPECT_EQ(run.first_row, covered);  // in row order, no gap
    for (std::int64_t r = 0; r < run.rows; ++r) out[static_cast<std::size_t>(run.first_row + r)] = run.first_token + r;
    covered += run.rows;
  }
  EXPECT_EQ(covered, rows.window_rows);
  return out;
}

// Micro-batch 1 of two sequences of 16 (sequences 6 and 7 of the step): one GPU's rows are tokens 96 .. 127.
TEST(DropoutKey, OneGpusRowsAreTheMicroBatchsTokens) {
  MicroBatchRows m{6, 16, 0, 2, 16, 1, 0, 0, 32};
  const std::vector<std::int64_t> tokens = tokens_of(m);
  for (std::int64_t r = 0; r < 32; ++r) EXPECT_EQ(tokens[static_cast<std::size_t>(r)], 96 + r);
}

TEST(DropoutKey, SequenceParallelSlicesAreTheOneGpuRowsTheyHold) {
  const std::vector<std::int64_t> whole = tokens_of({6, 16, 0, 2, 16, 1, 0, 0, 32});
  for (int tp_rank = 0; tp_rank < 4; ++tp_rank) {
    const std::vector<std::int64_t> slice = tokens_of({6, 16, 0, 2, 16, 1, 0, tp_rank * 8, 8});
    for (std::int64_t r = 0; r < 8; ++r) EXPECT_EQ(slice[static_cast<std::size_t>(r)], whole[tp_rank * 8 + r]);
  }
}

// CP 2: a sequence's rows here are chunks r and 3 - r of four; every token of both sequences is held once.
TEST(DropoutKey, ContextParallelChunksHoldEachTokenOnce) {
  std::multiset<std::int64_t> held;
  for (int cp_rank = 0; cp_rank < 2; ++cp_rank) {
    const std::vector<std::int64_t> tokens = tokens_of({6, 16, 0, 2, 8, 2, cp_rank, 0, 16});
    held.insert(tokens.begin(), tokens.end());
    EXPECT_EQ(tokens[0], 96 + cp_rank * 4);            // chunk r of sequence 6
    EXPECT_EQ(tokens[4], 96 + (3 - cp_rank) * 4);      // chunk 3 - r
    EXPECT_EQ(tokens[8], 112 + cp_rank * 4);           // sequence 7
  }
  for (std::int64_t t = 96; t < 128; ++t) EXPECT_EQ(held.count(t), 1u) << t;
  // With SP under CP the TP rank's slice of those rows.
  const std::vector<std::int64_t> slice = tokens_of({6, 16, 0, 2, 8, 2, 1, 6, 4});
  EXPECT_EQ(slice, (std::vector<std::int64_t>{106, 107, 116, 117}));
}

TEST(DropoutKey, AUlyssesShardStartsWhereItsRowsDo) {
  const std::vector<std::int64_t> tokens = tokens_of({6, 16, 8, 1, 16, 1, 0, 0, 8});  // the second half of seq 6
  EXPECT_EQ(tokens.front(), 96 + 8);
  EXPECT_EQ(tokens.back(), 96 + 15);
}

// One attention call's seed is the same each time it is asked (forward, recompute, backward) and differs from the
// seed of every call that differs in one field: the run's seed, step, layer, micro-batch, first row, any coordinate
// of the GPU or its rank in the unit's layout.
TEST(DropoutKey, AttentionSeedsAreOnePerCall) {
  const RankCoordinates at{1, 0, 2, 0};
  const std::int64_t base = attention_dropout_seed(1234, 7, 3, 2, 4096, at, 1);
  EXPECT_EQ(attention_dropout_seed(1234, 7, 3, 2, 4096, at, 1), base);
  EXPECT_GE(base, 0);
  const std::vector<std::int64_t> others = {
      attention_dropout_seed(1235, 7, 3, 2, 4096, at, 1), attention_dropout_seed(1234, 8, 3, 2, 4096, at, 1),
      attention_dropout_seed(1234, 7, 4, 2, 4096, at, 1), attention_dropout_seed(1234, 7, 3, 3, 4096, at, 1),
      attention_dropout_seed(1234, 7, 3, 2, 4097, at, 1), attention_dropout_seed(1234, 7, 3, 2, 4096, {0, 0, 2, 0}, 1),
      attention_dropout_seed(1234, 7, 3, 2, 4096, {1, 1, 2, 0}, 1),
      attention_dropout_seed(1234, 7, 3, 2, 4096, {1, 0, 3, 0}, 1),
      attention_dropout_seed(1234, 7, 3, 2, 4096, {1, 0, 2, 1}, 1), attention_dropout_seed(1234, 7, 3, 2, 4096, at, 0)};
  std::set<std::int64_t> distinct(others.begin(), others.end());
  distinct.insert(base);
  EXPECT_EQ(distinct.size(), others.size() + 1);
}

TEST(DropoutKey, RefusesAWindowOutsideTheRows) {
  EXPECT_THROW(batch_row_runs({6, 16, 0, 2, 16, 1, 0, 24, 16}), std::invalid_argument);
  EXPECT_THROW(batch_row_runs({6, 16, 0, 2, 16, 1, 0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(batch_row_runs({6, 16, 0, 2, 7, 2, 0, 0, 14}), std::invalid_argument);  // odd CP rows
}

}  // namespace
}  // namespace twin::exec
