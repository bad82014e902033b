// The search's lower bound (strategies/lower_bound.hpp) on every published configuration of the validation
// table (the deepest pipelines and the largest clusters twin prices): scaling one small lowering gives the sum
// over the whole graph, and the simulation never comes in under it.
#include <string>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "strategies/lower_bound.hpp"
#include "strategies/search.hpp"
#include "validation/published_table.hpp"

namespace twin {
namespace {

TEST(LowerBoundOnPublishedRuns, ScaledEqualsTheWholeGraphAndNoSimulationBeatsIt) {
  const PublishedTable table = load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json");
  int checked = 0;
  for (const PublishedRow& row : table.rows) {
    SCOPED_TRACE(row.id);
    const Profile profile = profile_for_cluster(builtin_profile(), row.scenario.cluster, true, table.source);
    for (const Candidate& c : enumerate_candidates(row.scenario)) {
      if (!c.feasible) continue;
      const TimeNs bound = compute_lower_bound_ns(row.scenario, c.strategy, profile);
      EXPECT_EQ(bound, compute_lower_bound_full_ns(row.scenario, c.strategy, profile)) << c.key();
      EXPECT_LE(bound, evaluate(row.scenario, profile, c.strategy, false).result.iteration_ns) << c.key();
      ++checked;
      break;  // one candidate per row: the deepest rows take seconds each
    }
  }
  EXPECT_GE(checked, 45);
}

}  // namespace
}  // namespace twin
