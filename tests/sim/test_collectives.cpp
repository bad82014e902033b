// Collective algorithms: nccl-tests closed forms through the whole engine, and the tuner's choices.
#include <gtest/gtest.h>

#include "sim/collectives.hpp"
#include "sim/flat_graph.hpp"
#include "sim/simulate.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

// One class running a single collective of `bytes` on a span; returns its time.
TimeNs time_alone(OpKind kind, const GroupSpan& span, Bytes bytes, const Cluster& cluster, const Profile& profile) {
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::data, span.size, span.ranks_per_node, span.nodes);
  rank_class.add(collective_op(kind, GroupKind::data, span.size, bytes, Stream::dp_comm));
  return simulate(graph, cluster, profile).iteration_ns;
}

sim::LinkParams params(const Cluster& cluster, const Profile& profile) {
  return sim::link_params(cluster.node_groups[0], cluster.network, profile);
}

TEST(Collectives, RingAllReduceInsideANodeIsTheNcclTestsIdeal) {
  const Cluster cluster = test_cluster(1);
  const Profile profile = test_profile(5.0, 0);
  const Bytes S = 8'000'000;
  for (int n : {2, 4, 8}) {
    // 2(n-1)/n * S / B + 2(n-1) * latency
    const TimeNs expected = static_cast<TimeNs>(2.0 * (n - 1) / n * S / kIntraGBps) + 2 * (n - 1) * 5'000;
    EXPECT_EQ(time_alone(OpKind::all_reduce, {n, n, 1}, S, cluster, profile), expected) << n;
  }
  // reduce_scatter and all_gather: half the traffic and half the steps.
  EXPECT_EQ(time_alone(OpKind::reduce_scatter, {8, 8, 1}, S, cluster, profile), 7 * S / 8 / 100 + 7 * 5'000);
  EXPECT_EQ(time_alone(OpKind::all_gather, {8, 8, 1}, S, cluster, profile), 7 * S / 8 / 100 + 7 * 5'000);
}

TEST(Collectives, RingAllReduceWithOneRankPerNodeUsesTheInterLink) {
  const Cluster cluster = test_cluster(8);
  const Profile profile = test_profile(0, 1.0);
  const double B = inter_GBps(cluster);
  ASSERT_EQ(B, 50);
  const Bytes S = 8'000'000;
  const GroupSpan span{8, 1, 8};
  const sim::CollectivePlan plan = sim::tune_collective(OpKind::all_reduce, S, span, params(cluster, profile));
  EXPECT_EQ(plan.algorithm, "ring");
  EXPECT_EQ(time_alone(OpKind::all_reduce, span, S, cluster, profile),
            static_cast<TimeNs>(2.0 * 7 / 8 * S / B) + 14 * 1'000);
}

TEST(Collectives, HierarchicalBeatsTheFlatRingAcrossNodes) {
  const Cluster cluster = test_cluster(4);
  const Profile profile = test_profile(1.0, 5.0);
  const double B_inter = inter_GBps(cluster);
  const Bytes S = 64'000'000;
  const GroupSpan span{32, 8, 4};
  const sim::LinkParams links = params(cluster, profile);
  const sim::CollectivePlan chosen = sim::tune_collective(OpKind::all_reduce, S, span, links);
  EXPECT_EQ(chosen.algorithm, "hierarchical");
  const double flat = sim::isolated_time_ns(sim::RingAlgorithm().plan(OpKind::all_reduce, S, span, links), S, links);
  EXPECT_LT(sim::isolated_time_ns(chosen, S, links), flat);
  // The flat ring: every rank forwards 2(n-1)/n*S at the slower (inter) link, 2(n-1) steps of inter latency.
  EXPECT_DOUBLE_EQ(flat, 2.0 * 31 / 32 * S / B_inter + 62 * 5'000);

  // intra RS (r-1)/r*S, inter AR 2(k-1)/k*S/r, intra AG (r-1)/r*S, in sequence.
  const TimeNs intra_half = static_cast<TimeNs>(7.0 / 8 * S / kIntraGBps) + 7 * 1'000;
  const TimeNs inter = static_cast<TimeNs>(2.0 * 3 / 4 * S / 8 / B_inter) + 6 * 5'000;
  EXPECT_EQ(time_alone(OpKind::all_reduce, span, S, cluster, profile), 2 * intra_half + inter);
  // reduce_scatter: intra RS then inter RS (k-1)/k*S/r.
  EXPECT_EQ(time_alone(OpKind::reduce_scatter, span, S, cluster, profile),
            intra_half + static_cast<TimeNs>(3.0 / 4 * S / 8 / B_inter) + 3 * 5'000);
}

TEST(Collectives, TreeWinsForSmallMessagesOverManyNodes) {
  const Cluster cluster = test_cluster(64);
  const Profile profile = test_profile(1.0, 10.0);
  const sim::LinkParams links = params(cluster, profile);
  const GroupSpan span{512, 8, 64};
  const sim::CollectivePlan small = sim::tune_collective(OpKind::all_reduce, 1024, span, links);
  EXPECT_EQ(small.algorithm, "tree");
  // 2(r-1) intra steps + 2 log2(k) inter steps; 2*S at the slower link.
  EXPECT_DOUBLE_EQ(sim::isolated_time_ns(small, 1024, links), 14 * 1'000 + 12 * 10'000 + 2.0 * 1024 / inter_GBps(cluster));
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 1 << 30, span, links).algorithm, "hierarchical");
}

TEST(Collectives, AllToAllSendsToNodePeersAndOtherNodesAtOnce) {
  const Cluster cluster = test_cluster(2);
  const Profile profile = test_profile(2.0, 6.0);
  const Bytes S = 16'000'000;
  // r=8, n=16: 7/16*S at 100 GB/s (70 us) alongside 8/16*S at 50 GB/s (160 us); one inter step.
  const TimeNs expected = std::max(static_cast<TimeNs>(7.0 / 16 * S / kIntraGBps),
                                   static_cast<TimeNs>(8.0 / 16 * S / inter_GBps(cluster))) + 6'000;
  EXPECT_EQ(time_alone(OpKind::all_to_all, {16, 8, 2}, S, cluster, profile), expected);
  // Inside one node: (n-1)/n*S.
  EXPECT_EQ(time_alone(OpKind::all_to_all, {8, 8, 1}, S, cluster, profile), 7 * S / 8 / 100 + 2'000);
}

TEST(Collectives, TunerIsDeterministicAndHandlesDegenerateGroups) {
  const Cluster cluster = test_cluster(2);
  const sim::LinkParams links = params(cluster, test_profile());
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 1 << 20, {1, 1, 1}, links).phase_count, 0);
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 0, {8, 8, 1}, links).phase_count, 0);
  EXPECT_THROW(sim::tune_collective(OpKind::send, 1 << 20, {2, 2, 1}, links), std::logic_error);
  // Inside one node only the ring applies; across nodes the choice does not depend on call order.
  EXPECT_EQ(sim::tune_collective(OpKind::reduce_scatter, 1 << 24, {8, 8, 1}, links).algorithm, "ring");
  EXPECT_EQ(sim::tune_collective(OpKind::reduce_scatter, 1 << 24, {16, 8, 2}, links).algorithm, "hierarchical");
  EXPECT_EQ(sim::tune_collective(OpKind::all_gather, 1 << 24, {16, 8, 2}, links).algorithm, "hierarchical");
  EXPECT_EQ(sim::tune_collective(OpKind::all_to_all, 1 << 24, {16, 8, 2}, links).algorithm, "all_to_all");
}

TEST(Collectives, LinkEfficiencyScalesBandwidthByMessageSize) {
  const Cluster cluster = test_cluster(1);
  Profile profile = test_profile();
  profile.intra_node.bandwidth = {0.8, 2'000'000};  // at 8 MB: 0.8 * 8 / 10 = 0.64
  const Bytes S = 8'000'000;
  EXPECT_EQ(time_alone(OpKind::all_gather, {8, 8, 1}, S, cluster, profile),
            static_cast<TimeNs>(7.0 / 8 * S / (kIntraGBps * 0.64) + 0.5));
}

}  // namespace
}  // namespace twin::test
