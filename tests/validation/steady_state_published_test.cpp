// Steady-state extrapolation (strategies/steady_state.hpp) on the published configurations of the validation
// table, the deepest pipelines twin prices (up to 64 stages and 512 micro-batches): every candidate of every row
// that it applies to, against the whole replay (but those whose whole graph exceeds the op limit, which only their
// steady state can price: Table 2's 529.6B model on 560 GPUs, 1,120 micro-batches); and on ZeRO-3 as DeepSpeed drives
// it (Narayanan et al.'s Table 2 rows, each at micro-batches enough for the extrapolation).
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

const std::string kPublishedTable = std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json";

TEST(SteadyStateOnPublishedRuns, EveryCandidateItAppliesToIsWithinToleranceOfTheWholeReplay) {
  const PublishedTable table = load_published_table(kPublishedTable);
  testing::SteadyStateTotals totals;
  for (const PublishedRow& row : table.rows) {
    SCOPED_TRACE(row.id);
    const Profile profile = profile_for_cluster(builtin_profile(), row.scenario.cluster, true, table.source);
    testing::expect_steady_state_within_tolerance(row.scenario, profile, totals);
  }
  std::printf("%d candidates (%d of 32 stages or more): worst iteration error %.4f%%, breakdown %.4f%%\n",
              totals.checked, totals.deep, 100 * totals.worst, 100 * totals.worst_part);
  EXPECT_GE(totals.checked, 20);
  EXPECT_GE(totals.deep, 4);
}

// Table 2's ZeRO-3 rows (one micro-batch per GPU each) at micro-batch 1 on at most an eighth of their nodes, the
// most that split the same global batch into 15 micro-batches or more per GPU (the fewest the extrapolation takes
// at one stage: 7.5 W, W = 2), the weights gathered in each; a row whose model then does not fit 80 GB is left out.
TEST(SteadyStateOnPublishedRuns, DeepSpeedZero3IsWithinToleranceOfTheWholeReplay) {
  const PublishedTable table = load_published_table(kPublishedTable);
  testing::SteadyStateTotals totals;
  for (const PublishedRow& published : table.rows) {
    if (published.group != "narayanan2021-table2-zero3" || published.scenario.search.zero_stage != std::vector<int>{3})
      continue;
    SCOPED_TRACE(published.id);
    Scenario scenario = published.scenario;
    NodeGroup& nodes = scenario.cluster.node_groups.front();
    const std::int64_t batch = scenario.training.global_batch_size;
    nodes.count /= 8;
    while (nodes.count > 1 && (batch % (nodes.count * nodes.gpus_per_node) != 0 ||
                               batch / (nodes.count * nodes.gpus_per_node) < 15))
      --nodes.count;
    scenario.search.micro_batch_size = {1};
    const Profile profile = profile_for_cluster(builtin_profile(), scenario.cluster, true, table.source);
    testing::expect_steady_state_within_tolerance(scenario, profile, totals);
  }
  std::printf("%d DeepSpeed ZeRO-3 candidates: worst iteration error %.4f%%, breakdown %.4f%%\n", totals.checked,
              100 * totals.worst, 100 * totals.worst_part);
  EXPECT_GE(totals.checked, 3);
}

}  // namespace
}  // namespace twin
