// Collective algorithms: nccl-tests closed forms through the whole engine, and the tuner's choices.
#include <cmath>

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

double best_ring_ns(OpKind kind, const GroupSpan& span, double bytes, double link_GBps) {
  return nccl_ring_alone_ns(kind, span, bytes, link_GBps);
}

TEST(Collectives, NcclLatencyMatchesNcclsOwnModel) {
  // docs/validation/nccl_model_notes.md, section 5: 128 GPUs on 16 nodes (an Intel host's 1 us net overhead,
  // x3 for Simple, floors the ring's intra hop): ring/Simple 8.4 + 224 x 3.4 + 30 x 14, x1.4 for large messages;
  // tree/Simple 8.4 + 2 (7 x 4.0 + 4 x 14); tree/LL 6.8 + 2 (7 x 0.6 + 4 x 5.0).
  const GroupSpan span{128, 8, 16};
  using sim::NcclAlgorithm, sim::NcclProtocol;
  EXPECT_NEAR(sim::nccl_latency_us(NcclAlgorithm::ring, NcclProtocol::simple, OpKind::all_reduce, span, {}),
              1.4 * (8.4 + 224 * 3.4 + 30 * 14.0), 1e-9);
  EXPECT_NEAR(sim::nccl_latency_us(NcclAlgorithm::tree, NcclProtocol::simple, OpKind::all_reduce, span, {}), 176.4, 1e-9);
  EXPECT_NEAR(sim::nccl_latency_us(NcclAlgorithm::tree, NcclProtocol::ll, OpKind::all_reduce, span, {}), 55.2, 1e-9);
  // Inside one node every step is an NVLink hop; reduce-scatter takes half the all-reduce's steps.
  EXPECT_NEAR(sim::nccl_latency_us(NcclAlgorithm::ring, NcclProtocol::simple, OpKind::reduce_scatter, {8, 8, 1}, {}),
              8.4 + 7 * 3.4, 1e-9);
  // Protocols: LL half the bandwidth, LL128 0.92; a tree 0.92 times NCCL's correction for the size (Simple,
  // 1 GiB: past the table's end, 0.9).
  EXPECT_EQ(sim::nccl_bandwidth_factor(NcclAlgorithm::ring, NcclProtocol::ll, 1e6), 0.5);
  EXPECT_EQ(sim::nccl_bandwidth_factor(NcclAlgorithm::ring, NcclProtocol::ll128, 1e6), 0.92);
  EXPECT_NEAR(sim::nccl_bandwidth_factor(NcclAlgorithm::tree, NcclProtocol::simple, 1 << 30), 0.92 * 0.9, 1e-12);
}

TEST(Collectives, RingInsideANodeIsTheNcclTestsIdealAtItsFastestProtocol) {
  const Cluster cluster = test_cluster(1);
  const Profile profile = test_profile();
  const double S = 8'000'000;
  for (int n : {2, 4, 8}) {
    const GroupSpan span{n, n, 1};
    EXPECT_NEAR(time_alone(OpKind::all_reduce, span, S, cluster, profile),
                best_ring_ns(OpKind::all_reduce, span, S, kIntraGBps), 1.0) << n;
  }
  EXPECT_NEAR(time_alone(OpKind::reduce_scatter, {8, 8, 1}, S, cluster, profile),
              best_ring_ns(OpKind::reduce_scatter, {8, 8, 1}, S, kIntraGBps), 1.0);
  EXPECT_NEAR(time_alone(OpKind::all_gather, {8, 8, 1}, S, cluster, profile),
              best_ring_ns(OpKind::all_gather, {8, 8, 1}, S, kIntraGBps), 1.0);
}

TEST(Collectives, RingAcrossNodesCrossesEachNodeOncePerChannel) {
  // 4 nodes of 8: a GPU moves 7/8 of the ring's traffic over NVLink and 1/8 over its NIC, at once; the
  // NICs (50 GB/s per GPU here) set the pace: bus bandwidth = 8 x 50 = 400 GB/s, not 50.
  const Cluster cluster = test_cluster(4);
  const sim::LinkParams links = params(cluster, test_profile());
  const double S = 1 << 30;
  const GroupSpan span{32, 8, 4};
  const sim::CollectivePlan ring =
      sim::nccl_plan(sim::NcclAlgorithm::ring, sim::NcclProtocol::simple, OpKind::all_reduce, S, span, links);
  ASSERT_EQ(ring.phase_count, 1);
  const double traffic = 2.0 * 31 / 32 * S;
  EXPECT_DOUBLE_EQ(ring.phases[0].flows[0].bytes, traffic * 7 / 8);
  EXPECT_DOUBLE_EQ(ring.phases[0].flows[1].bytes, traffic / 8);
  EXPECT_NEAR(sim::isolated_time_ns(ring, S, links),
              ring.phases[0].latency_ns + std::max(traffic * 7 / 8 / kIntraGBps, traffic / 8 / inter_GBps(cluster)), 1.0);
  // One rank per node: everything over the NIC.
  const sim::CollectivePlan rail =
      sim::nccl_plan(sim::NcclAlgorithm::ring, sim::NcclProtocol::simple, OpKind::all_reduce, S, {8, 1, 8}, links);
  ASSERT_EQ(rail.phases[0].flow_count, 1);
  EXPECT_EQ(rail.phases[0].flows[0].links, sim::kInterLink);
  EXPECT_DOUBLE_EQ(rail.phases[0].flows[0].bytes, 2.0 * 7 / 8 * S);
}

TEST(Collectives, TreeSendsHalfAsMuchOverTheNicsOnTwoNodes) {
  const Cluster cluster = test_cluster(8);
  const sim::LinkParams links = params(cluster, test_profile());
  const double S = 1 << 28;
  const double factor = sim::nccl_bandwidth_factor(sim::NcclAlgorithm::tree, sim::NcclProtocol::simple, S);
  for (int nodes : {2, 8}) {
    const sim::CollectivePlan tree = sim::nccl_plan(sim::NcclAlgorithm::tree, sim::NcclProtocol::simple,
                                                    OpKind::all_reduce, S, {8 * nodes, 8, nodes}, links);
    // A node sends 2S (k-1)/k over its 8 NICs (S up the two trees, S down; half on 2 nodes), a GPU 1/8.
    EXPECT_DOUBLE_EQ(tree.phases[0].flows[1].bytes, 2.0 * S * (nodes - 1) / nodes / 8 / factor) << nodes;
  }
}

TEST(Collectives, TreeWinsForSmallMessagesOverManyNodesRingForLargeOnes) {
  const Cluster cluster = test_cluster(64);
  const sim::LinkParams links = params(cluster, test_profile());
  const GroupSpan span{512, 8, 64};
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 1 << 20, span, links).algorithm, "tree");
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 1024, span, links).protocol, "LL");
  // Inside one node there is no tree; one node's ring over NVLink beats LL's half bandwidth at 1 GiB.
  const sim::CollectivePlan node = sim::tune_collective(OpKind::all_reduce, 1 << 30, {8, 8, 1}, links);
  EXPECT_EQ(node.algorithm, "ring");
  EXPECT_EQ(node.protocol, "Simple");
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

// The flex dispatcher (DeepEP, HybridEP): a token crosses to another node once however many of its experts live
// there, and reaches a rank once however many of its experts that rank holds.
TEST(Collectives, FlexDispatchSendsATokenOncePerNodeAndRank) {
  // One expert of n, top-1: the hit probability of m experts is m/n, as a plain all-to-all's split.
  EXPECT_DOUBLE_EQ(sim::dispatch_hit_probability(128, 1, 8), 8.0 / 128);
  // Qwen3-30B-A3B (128 experts, top-8) on EP 16 over two nodes: 64 experts a node, 8 a rank.
  double node_miss = 1.0, rank_miss = 1.0;
  for (int i = 0; i < 8; ++i) {
    node_miss *= (64.0 - i) / (128.0 - i);
    rank_miss *= (120.0 - i) / (128.0 - i);
  }
  EXPECT_DOUBLE_EQ(sim::dispatch_hit_probability(128, 8, 64), 1.0 - node_miss);
  EXPECT_DOUBLE_EQ(sim::dispatch_hit_probability(128, 8, 8), 1.0 - rank_miss);
  EXPECT_DOUBLE_EQ(sim::dispatch_hit_probability(8, 8, 1), 1.0);  // every expert picked
  EXPECT_DOUBLE_EQ(sim::dispatch_hit_probability(128, 8, 0), 0.0);

  const Cluster cluster = test_cluster(2);
  const sim::LinkParams links = params(cluster, test_profile());
  const double T = 1e6;  // the rank's token bytes
  const sim::CollectivePlan plan = sim::deduplicated_dispatch_plan(T, 128, 8, {16, 8, 2}, links);
  EXPECT_EQ(plan.algorithm, "dedup_all_to_all");
  ASSERT_EQ(plan.phase_count, 1);
  ASSERT_EQ(plan.phases[0].flow_count, 2);
  // NVLink: its own tokens to the 7 other ranks of its node and the other node's forwarded ones, each where hit.
  EXPECT_DOUBLE_EQ(plan.phases[0].flows[0].bytes, T * 2 * 7 * (1.0 - rank_miss));
  // RDMA: once to the other node when any of its 64 experts is picked (99.6%), against the 4 copies alltoall sends.
  EXPECT_DOUBLE_EQ(plan.phases[0].flows[1].bytes, T * (1.0 - node_miss));
  EXPECT_GT(plan.phases[0].flows[1].bytes, 0.99 * T);
  EXPECT_LT(plan.phases[0].flows[1].bytes, sim::all_to_all_plan(T * 8, {16, 8, 2}, links).phases[0].flows[1].bytes / 4 + 1);
  // One node: NVLink only.
  const sim::CollectivePlan node = sim::deduplicated_dispatch_plan(T, 128, 8, {8, 8, 1}, links);
  ASSERT_EQ(node.phases[0].flow_count, 1);
  EXPECT_EQ(node.phases[0].flows[0].links, sim::kIntraLink);
  // An op that carries its routing gets this plan; one without, the tuner's.
  Op op = collective_op(OpKind::all_to_all, GroupKind::expert, 16, 1'000'000, Stream::ep_comm);
  EXPECT_EQ(sim::collective_plan(op, {16, 8, 2}, links).algorithm, "all_to_all");
  op.dispatch_experts = 128;
  op.dispatch_top_k = 8;
  EXPECT_EQ(sim::collective_plan(op, {16, 8, 2}, links).algorithm, "dedup_all_to_all");
}

TEST(Collectives, TunerIsDeterministicAndHandlesDegenerateGroups) {
  const Cluster cluster = test_cluster(2);
  const sim::LinkParams links = params(cluster, test_profile());
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 1 << 20, {1, 1, 1}, links).phase_count, 0);
  EXPECT_EQ(sim::tune_collective(OpKind::all_reduce, 0, {8, 8, 1}, links).phase_count, 0);
  EXPECT_THROW(sim::tune_collective(OpKind::send, 1 << 20, {2, 2, 1}, links), std::logic_error);
  // Reduce-scatter and all-gather run as rings (NCCL's tree is all-reduce only).
  EXPECT_EQ(sim::tune_collective(OpKind::reduce_scatter, 1 << 24, {8, 8, 1}, links).algorithm, "ring");
  EXPECT_EQ(sim::tune_collective(OpKind::reduce_scatter, 1 << 24, {16, 8, 2}, links).algorithm, "ring");
  EXPECT_EQ(sim::tune_collective(OpKind::all_gather, 1 << 24, {16, 8, 2}, links).algorithm, "ring");
  EXPECT_EQ(sim::tune_collective(OpKind::all_to_all, 1 << 24, {16, 8, 2}, links).algorithm, "all_to_all");
}

TEST(Collectives, LinkEfficiencyScalesBandwidthByMessageSize) {
  const Cluster cluster = test_cluster(1);
  Profile profile = test_profile();
  profile.intra_node.bandwidth = {0.8, 2'000'000};  // at 8 MB: 0.8 * 8 / 10 = 0.64
  const Bytes S = 8'000'000;
  EXPECT_NEAR(time_alone(OpKind::all_gather, {8, 8, 1}, S, cluster, profile),
              best_ring_ns(OpKind::all_gather, {8, 8, 1}, S, kIntraGBps * 0.64), 1.0);
}

}  // namespace
}  // namespace twin::test
