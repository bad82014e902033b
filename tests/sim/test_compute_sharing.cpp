// Two compute streams (double strand) share the GPU: each of n concurrent compute ops runs at 1/n of
// its rate, on top of the communication slowdown, so co-running compute gains nothing by itself.
#include <gtest/gtest.h>

#include "sim_test_world.hpp"

namespace twin::test {
namespace {

Op on_second_stream(Op op) {
  op.stream = Stream::compute2;
  return op;
}

TEST(ComputeSharing, TwoComputeStreamsTakeTheSumOfTheirTimes) {
  const Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  const Op a = compute_op(1'000'000), b = on_second_stream(compute_op(3'000'000));
  rank_class.add(a);
  rank_class.add(b);
  const TimeNs ta = duration_of(profile, a), tb = duration_of(profile, b);
  ASSERT_EQ(tb, 3 * ta);

  const IterationResult result = simulate(graph, test_cluster(1), profile);
  const auto& timings = result.classes[0].op_timings;
  // Both at half rate until a ends at 2*ta; then b's remaining tb - ta at full rate.
  EXPECT_EQ(timings[0].start_ns, 0);
  EXPECT_EQ(timings[1].start_ns, 0);
  EXPECT_EQ(timings[0].end_ns, 2 * ta);
  EXPECT_EQ(timings[1].end_ns, ta + tb);
  EXPECT_EQ(result.iteration_ns, ta + tb);
  EXPECT_EQ(result.breakdown.compute_ns, ta + tb);
}

TEST(ComputeSharing, SharingStacksWithTheCommunicationSlowdown) {
  Profile profile = test_profile();
  profile.overlap = {1.5, 1.0};
  const Cluster cluster = test_cluster(1);
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);
  const Op a = compute_op(2'000'000), b = on_second_stream(compute_op(2'000'000));
  rank_class.add(a);
  rank_class.add(b);
  rank_class.add(ring_send_op(10'000'000));  // 100 us alone: outlasts the compute
  const TimeNs t = duration_of(profile, a);
  ASSERT_EQ(t % 2, 0);

  const IterationResult result = simulate(graph, cluster, profile);
  const auto& timings = result.classes[0].op_timings;
  // Two equal ops sharing, each 1.5x slower under communication: both end at 2 * 1.5 * t.
  EXPECT_EQ(timings[0].end_ns, 3 * t);
  EXPECT_EQ(timings[1].end_ns, 3 * t);
  ASSERT_LT(3 * t, timings[2].end_ns);
}

TEST(ComputeSharing, AStreamOrderedAfterTheOtherRunsAtFullSpeed) {
  const Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  const Op a = compute_op(1'000'000), b = on_second_stream(compute_op(1'000'000)), c = compute_op(2'000'000);
  const OpIndex first = rank_class.add(a);
  const OpIndex second = rank_class.add(b);
  rank_class.add(c);
  rank_class.add_dependency(first, second);
  const TimeNs ta = duration_of(profile, a), tc = duration_of(profile, c);

  const IterationResult result = simulate(graph, test_cluster(1), profile);
  const auto& timings = result.classes[0].op_timings;
  // a alone; then b (compute2) and c (compute) share until b ends at ta + 2*ta; c's rest alone.
  EXPECT_EQ(timings[0].end_ns, ta);
  EXPECT_EQ(timings[1].end_ns, 3 * ta);
  EXPECT_EQ(timings[2].end_ns, ta + ta + tc);
}

}  // namespace
}  // namespace twin::test
