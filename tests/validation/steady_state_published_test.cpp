// Steady-state extrapolation (strategies/steady_state.hpp) on the published configurations of the validation
// table, the deepest pipelines twin prices (up to 64 stages and 512 micro-batches): every candidate of every row
// that it applies to, against the whole replay.
#include <algorithm>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "strategies/search.hpp"
#include "strategies/steady_state.hpp"
#include "tests/strategies/steady_state_errors.hpp"
#include "validation/published_table.hpp"

namespace twin {
namespace {

TEST(SteadyStateOnPublishedRuns, EveryCandidateItAppliesToIsWithinToleranceOfTheWholeReplay) {
  const PublishedTable table = load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json");
  int checked = 0, deep = 0;
  double worst = 0, worst_part = 0;
  for (const PublishedRow& row : table.rows) {
    SCOPED_TRACE(row.id);
    const Profile profile = profile_for_cluster(builtin_profile(), row.scenario.cluster, true, table.source);
    for (const Candidate& c : enumerate_candidates(row.scenario)) {
      if (!c.feasible) continue;
      const std::optional<SteadyStateReplay> replay = steady_state_replay(row.scenario, c.strategy);
      if (!replay) continue;
      const testing::SteadyStateErrors e = testing::steady_state_errors(row.scenario, profile, c.strategy, *replay);
      EXPECT_LE(e.iteration, kSteadyStateIterationTolerance) << c.key();
      EXPECT_LE(e.worst_part, kSteadyStateBreakdownTolerance) << c.key();
      EXPECT_TRUE(e.parts_add_up) << c.key();
      worst = std::max(worst, e.iteration);
      worst_part = std::max(worst_part, e.worst_part);
      ++checked;
      if (c.strategy.pipeline_model_parallel_size >= 32) ++deep;
    }
  }
  std::printf("%d candidates (%d of 32 stages or more): worst iteration error %.4f%%, breakdown %.4f%%\n", checked,
              deep, 100 * worst, 100 * worst_part);
  EXPECT_GE(checked, 20);
  EXPECT_GE(deep, 4);
}

}  // namespace
}  // namespace twin
