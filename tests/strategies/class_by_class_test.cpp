// simulate_class_by_class (strategies/class_by_class.hpp) against the whole path it stands in for, lowering the
// whole graph and simulating it: the same result to the nanosecond on candidates of every shipped scenario, one
// after another on one thread (each lowered over the storage of the one before), and the same double-strand
// pairings.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "sim/price_cache.hpp"
#include "sim/simulate.hpp"
#include "strategies/class_by_class.hpp"
#include "strategies/lowering.hpp"
#include "strategies/search.hpp"
#include "tests/strategies/shipped_scenarios.hpp"

namespace twin {
namespace {


void expect_same(const TimeBreakdown& a, const TimeBreakdown& b) {
  EXPECT_EQ(a.compute_ns, b.compute_ns);
  EXPECT_EQ(a.exposed_communication_ns, b.exposed_communication_ns);
  EXPECT_EQ(a.bubble_ns, b.bubble_ns);
  EXPECT_EQ(a.optimizer_ns, b.optimizer_ns);
}

void expect_same(const IterationResult& a, const IterationResult& b) {
  EXPECT_EQ(a.iteration_ns, b.iteration_ns);
  EXPECT_EQ(a.critical_class, b.critical_class);
  EXPECT_EQ(a.events, b.events);
  expect_same(a.breakdown, b.breakdown);
  ASSERT_EQ(a.classes.size(), b.classes.size());
  for (std::size_t c = 0; c < a.classes.size(); ++c) {
    SCOPED_TRACE("class " + std::to_string(c));
    EXPECT_EQ(a.classes[c].finish_ns, b.classes[c].finish_ns);
    EXPECT_EQ(a.classes[c].communication_busy_ns, b.classes[c].communication_busy_ns);
    expect_same(a.classes[c].breakdown, b.classes[c].breakdown);
  }
}

TEST(ClassByClass, EqualsTheWholeGraphsReplayOnCandidatesOfEveryShippedScenario) {
  const int checked = testing::check_spread_candidates(
      6, [](const Scenario& scenario, const Profile& profile, sim::PriceCache& prices, const Strategy& strategy) {
        std::vector<StrandPairingSummary> whole_pairings, pairings;
        const IterationGraph graph = lower_to_op_graphs(scenario, strategy, profile, &whole_pairings);
        const IterationResult whole =
            simulate_iteration(graph, scenario.cluster, profile, SimOptions{false, &prices});
        expect_same(simulate_class_by_class(scenario, strategy, profile, &prices, &pairings), whole);
        ASSERT_EQ(pairings.size(), whole_pairings.size());
        for (std::size_t k = 0; k < pairings.size(); ++k) EXPECT_EQ(pairings[k].blocks, whole_pairings[k].blocks);
      });
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace twin
