// A GPU's rows under context parallelism (executor/context_rows.hpp), the walk RoPE's positions and hidden dropout's
// batch tokens share: every position of every sequence held by exactly one CP rank, each rank's rows its chunks r
// and 2cp-1-r in row order.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "executor/context_rows.hpp"

namespace twin::exec {
namespace {

// CP 2 over sequences of 16: a rank holds 8 rows a sequence, chunks of 4 (rank 0: chunks 0 and 3, rank 1: 1 and 2).
TEST(ContextRows, ARanksRowsAreItsTwoChunksOfEachSequence) {
  EXPECT_EQ(context_row_runs(2, 8, 0, 2), (std::vector<ContextRowRun>{
                                              {0, 4, 0, 0}, {4, 4, 0, 12}, {8, 4, 1, 0}, {12, 4, 1, 12}}));
  EXPECT_EQ(context_row_runs(2, 8, 1, 2), (std::vector<ContextRowRun>{
                                              {0, 4, 0, 4}, {4, 4, 0, 8}, {8, 4, 1, 4}, {12, 4, 1, 8}}));
}

// Every position of each sequence is held once over the CP ranks, and each rank's runs cover its rows in order.
TEST(ContextRows, TheRanksHoldEveryPositionOnce) {
  for (const int cp : {1, 2, 4}) {
    const std::int64_t length = 64, local = length / cp, sequences = 3;
    std::set<std::pair<std::int64_t, std::int64_t>> held;  // (sequence, position)
    for (int rank = 0; rank < cp; ++rank) {
      std::int64_t row = 0;
      for (const ContextRowRun& run : context_row_runs(sequences, local, rank, cp)) {
        EXPECT_EQ(run.first_row, row) << "cp " << cp << " rank " << rank;
        row += run.rows;
        for (std::int64_t r = 0; r < run.rows; ++r)
          EXPECT_TRUE(held.insert({run.sequence, run.first_position + r}).second) << "cp " << cp;
      }
      EXPECT_EQ(row, sequences * local);
    }
    EXPECT_EQ(static_cast<std::int64_t>(held.size()), sequences * length) << "cp " << cp;
  }
}

TEST(ContextRows, RefusesRowsThatAreNotTwoChunksAndRanksOutsideTheGroup) {
  EXPECT_THROW(context_row_runs(2, 7, 0, 2), std::invalid_argument);
  EXPECT_THROW(context_row_runs(2, 0, 0, 2), std::invalid_argument);
  EXPECT_THROW(context_row_runs(2, 8, 2, 2), std::invalid_argument);
  EXPECT_THROW(context_row_runs(2, 8, -1, 2), std::invalid_argument);
}

}  // namespace
}  // namespace twin::exec
