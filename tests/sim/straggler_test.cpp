// Ranks that drift apart wait for the last at every collective (sim/straggler.hpp): the expected largest of n
// normals against its tabulated values, and the engine's wait on a hand-built graph.
#include <cmath>

#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "sim/straggler.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

using sim::arrival_wait_share;
using sim::expected_largest_of_normals;

// Expected largest of n standard normals, tabulated (Harter 1961, "Expected values of normal order statistics").
TEST(Straggler, ExpectedLargestOfNormalsMatchesTheTable) {
  EXPECT_EQ(expected_largest_of_normals(1), 0);
  EXPECT_NEAR(expected_largest_of_normals(2), 0.5642, 0.5642 * 0.05);
  for (const auto [ranks, exact] : {std::pair{5, 1.1630}, {10, 1.5388}, {100, 2.5076}, {1000, 3.2414}})
    EXPECT_NEAR(expected_largest_of_normals(ranks), exact, exact * 0.015) << ranks;
  EXPECT_EQ(arrival_wait_share(0, 512), 0);
  EXPECT_DOUBLE_EQ(arrival_wait_share(0.03, 100), 0.03 * expected_largest_of_normals(100));
}

// Compute, then two all-gathers over 8 ranks, then compute and a third: the first waits its share of the compute
// before it, the second none (nothing computed since the first synchronised the group), the third its share of
// the compute between.
TEST(Straggler, ACollectiveWaitsItsShareOfTheComputeSinceTheGroupLastSynchronised) {
  for (const double spread : {0.0, 0.05}) {
    Profile profile = test_profile();
    profile.gpus.front().sm_clock_spread = spread;
    IterationGraph graph;
    RankClass& rank_class = add_class(graph, 0);
    set_span(rank_class, GroupKind::data, 8, 8, 1);
    const Op first_compute = compute_op(4'000'000), second_compute = compute_op(2'000'000);
    const Op gather = collective_op(OpKind::all_gather, GroupKind::data, 8, 1'000'000, Stream::compute);
    rank_class.add(first_compute);
    rank_class.add(gather);
    rank_class.add(gather);
    rank_class.add(second_compute);
    rank_class.add(gather);
    const IterationResult result = simulate(graph, test_cluster(1), profile);
    const double share = arrival_wait_share(spread, 8);
    const double compute_ns = double(duration_of(profile, first_compute) + duration_of(profile, second_compute));
    const double gather_ns = nccl_ring_alone_ns(OpKind::all_gather, {8, 8, 1}, 1'000'000, kIntraGBps);
    EXPECT_NEAR(double(result.iteration_ns), compute_ns * (1 + share) + 3 * gather_ns, 4) << spread;
  }
}

}  // namespace
}  // namespace twin::test
