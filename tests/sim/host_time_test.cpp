// Host time (Op::host_ns) in the engine: an op waits it once its dependencies have finished, the host does one
// such piece of work at a time, and an op of the class made ready while the host works waits for it; a class
// without host time starts each op when it is ready.
#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

constexpr TimeNs kHostNs = 7'000;

TEST(HostTime, AnOpStartsAfterItsHostTimeAndTheOpsReleasedWithItWaitForTheHost) {
  const Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);
  const Op first = compute_op(1'000'000), next = compute_op(2'000'000);
  Op gather = ring_send_op(500'000);
  gather.host_ns = kHostNs;
  const OpIndex a = rank_class.add(first);
  const OpIndex g = rank_class.add(gather);  // with host time, released by `a` as the compute after it is
  rank_class.add(next);
  rank_class.add_dependency(a, g);
  const TimeNs ta = duration_of(profile, first), tn = duration_of(profile, next);
  const TimeNs t_send = 500'000 / static_cast<TimeNs>(kIntraGBps);

  const IterationResult result = simulate(graph, test_cluster(1), profile);
  const auto& timings = result.classes[0].op_timings;
  EXPECT_EQ(timings[1].start_ns, ta + kHostNs);  // its own host time
  EXPECT_EQ(timings[2].start_ns, ta + kHostNs);  // ready at ta, issued once the host is done
  EXPECT_EQ(result.iteration_ns, ta + kHostNs + std::max(tn, t_send));
  // The host's wait is idle time: nothing of the GPU is busy.
  EXPECT_EQ(result.breakdown.bubble_ns, kHostNs);
}

TEST(HostTime, TheHostDoesOnePieceOfWorkAtATimeAndLaterOpsDoNotWait) {
  const Profile profile = test_profile();
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);
  set_span(rank_class, GroupKind::data, 2, 2, 1);
  Op one = ring_send_op(100'000), two = ring_send_op(100'000, Stream::dp_comm);
  one.host_ns = kHostNs;
  two.host_ns = 2 * kHostNs;
  rank_class.add(one);
  rank_class.add(two);
  const Op late = compute_op(50'000'000);  // ready at 0 too: waits for both pieces of host work
  rank_class.add(late);
  const IterationResult result = simulate(graph, test_cluster(1), profile);
  const auto& timings = result.classes[0].op_timings;
  EXPECT_EQ(timings[0].start_ns, kHostNs);
  EXPECT_EQ(timings[1].start_ns, 3 * kHostNs);
  EXPECT_EQ(timings[2].start_ns, 3 * kHostNs);

  // Made ready after the host work has ended, an op starts at once.
  IterationGraph after;
  RankClass& second = add_class(after, 0);
  set_span(second, GroupKind::context, 2, 2, 1);
  const OpIndex g = second.add(one);
  const OpIndex c = second.add(compute_op(1'000'000));
  second.add_dependency(g, c);
  const TimeNs t_send = 100'000 / static_cast<TimeNs>(kIntraGBps);
  const IterationResult alone = simulate(after, test_cluster(1), profile);
  EXPECT_EQ(alone.classes[0].op_timings[1].start_ns, kHostNs + t_send);
}

TEST(HostTime, AClassWithoutHostTimeIsNotDelayedByAnothersHost) {
  const Profile profile = test_profile();
  IterationGraph graph;
  for (int c = 0; c < 2; ++c) {
    RankClass& rank_class = add_class(graph, c * kGpusPerNode);
    rank_class.num_ranks = 1;
    Op op = compute_op(1'000'000);
    op.host_ns = c == 0 ? kHostNs : 0;
    rank_class.add(op);
  }
  const IterationResult result = simulate(graph, test_cluster(2), profile);
  EXPECT_EQ(result.classes[0].op_timings[0].start_ns, kHostNs);
  EXPECT_EQ(result.classes[1].op_timings[0].start_ns, 0);
}

// Dispatch time (Op::dispatch_ns): the host issues the class's ops in order without waiting for the GPU, each after
// the dispatch times before it and its own; an op starts when it is ready and issued.
TEST(DispatchTime, TheHostIssuesInOrderAheadOfTheGpuAndBoundsShortOps) {
  const Profile profile = test_profile();
  const Op longer = compute_op(50'000'000);
  const TimeNs t_long = duration_of(profile, longer);
  ASSERT_GT(t_long, 3 * kHostNs);
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  for (int i = 0; i < 3; ++i) {
    Op op = longer;
    op.dispatch_ns = kHostNs;
    rank_class.add(op);
  }
  const IterationResult result = simulate(graph, test_cluster(1), profile);
  const auto& timings = result.classes[0].op_timings;
  EXPECT_EQ(timings[0].start_ns, kHostNs);            // the first waits for its issue
  EXPECT_EQ(timings[1].start_ns, kHostNs + t_long);   // issued at 2 x kHostNs, long before the GPU is free
  EXPECT_EQ(result.iteration_ns, kHostNs + 3 * t_long);

  // Ops shorter than their dispatch: the host bounds the step, the GPU waits between them (idle).
  IterationGraph short_ops;
  RankClass& second = add_class(short_ops, 0);
  const Op shorter = compute_op(1'000);
  const TimeNs t_short = duration_of(profile, shorter);
  ASSERT_LT(t_short, kHostNs);
  for (int i = 0; i < 3; ++i) {
    Op op = shorter;
    op.dispatch_ns = kHostNs;
    second.add(op);
  }
  const IterationResult bound = simulate(short_ops, test_cluster(1), profile);
  EXPECT_EQ(bound.classes[0].op_timings[2].start_ns, 3 * kHostNs);
  EXPECT_EQ(bound.iteration_ns, 3 * kHostNs + t_short);
  EXPECT_EQ(bound.breakdown.compute_ns, 3 * t_short);
}

}  // namespace
}  // namespace twin::test
