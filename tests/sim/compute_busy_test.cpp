// sim::compute_busy on hand-built graphs: compute priced one after another, plus the communication the compute
// stream must wait through, and never more than the engine's replay.
#include <gtest/gtest.h>

#include "sim/flat_graph.hpp"
#include "sim/simulate.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

// A (compute) -> all-reduce -> B (compute), all in micro-batch `b_micro_batch` for B and 0 for A.
IterationGraph waiting_pass(int b_micro_batch, bool second_strand) {
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::tensor, 8, 8, 1);
  Op a = compute_op(4'000'000);
  a.micro_batch = 0;
  Op b = compute_op(2'000'000);
  b.micro_batch = b_micro_batch;
  Op reduce = collective_op(OpKind::all_reduce, GroupKind::tensor, 8, 8'000'000, Stream::tp_comm);
  reduce.micro_batch = 0;
  const OpIndex first = rank_class.add(a);
  const OpIndex between = rank_class.add(reduce);
  const OpIndex then = rank_class.add(b);
  rank_class.add_dependency(first, between);
  rank_class.add_dependency(between, then);
  if (second_strand) {
    Op other = compute_op(1'000);
    other.stream = Stream::compute2;
    rank_class.add(other);
  }
  return graph;
}

TEST(ComputeBusy, CountsTheCollectiveTheComputeStreamWaitsThroughAndStaysUnderTheReplay) {
  const Profile profile = test_profile();
  const Cluster cluster = test_cluster(1);
  const TimeNs a = duration_of(profile, compute_op(4'000'000)), b = duration_of(profile, compute_op(2'000'000));
  const double reduce_alone = nccl_ring_alone_ns(OpKind::all_reduce, {8, 8, 1}, 8'000'000, kIntraGBps);

  const IterationGraph same_pass = waiting_pass(0, false);
  const sim::ComputeBusy busy = sim::compute_busy(same_pass, cluster, profile).at(0);
  EXPECT_NEAR(static_cast<double>(busy.passes.forward_ns), static_cast<double>(a + b) + reduce_alone, 1.0);
  EXPECT_EQ(busy.first_chunk.forward_ns, busy.passes.forward_ns);
  const TimeNs replay = simulate_iteration(same_pass, cluster, profile).iteration_ns;
  EXPECT_LE(busy.passes.forward_ns, replay);
  EXPECT_GE(busy.passes.forward_ns, replay - 1);  // nothing else runs: the bound is the replay, rounding aside

  // Across passes the wait is not counted (a pass's wait must be the same in every micro-batch to scale);
  // beside a second compute stream neither (the other strand may fill it).
  EXPECT_EQ(sim::compute_busy(waiting_pass(1, false), cluster, profile).at(0).passes.forward_ns, a + b);
  const sim::ComputeBusy strands = sim::compute_busy(waiting_pass(0, true), cluster, profile).at(0);
  EXPECT_EQ(strands.passes.forward_ns, a + b + duration_of(profile, compute_op(1'000)));
}

}  // namespace
}  // namespace twin::test
