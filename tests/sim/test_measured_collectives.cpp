// Measured collective tables in the simulator: a table's time becomes latency plus a flow that takes
// the rest alone and shares its link like any flow; unmeasured spans and other GPUs keep the models.
#include <gtest/gtest.h>

#include "sim/measured_collectives.hpp"
#include "sim_test_world.hpp"

namespace twin {
namespace {

using namespace twin::test;

// all_reduce over 8 GPUs of one node: 20 us at 1 MB, 80 us at 4 MB (slope 1 in log-log, so 40 us at
// 2 MB); fitted 1 us per step (14 steps) and half of the 100 GB/s nominal bus bandwidth.
CollectiveTable all_reduce_table(const std::string& gpu = test_gpu().name) {
  CollectiveTable t;
  t.gpu = gpu;
  t.collective = OpKind::all_reduce;
  t.group_size = 8;
  t.ranks_per_node = 8;
  t.nodes = 1;
  t.nominal_bandwidth_GBps = 100;
  t.fit = {1.0, {0.5, 0}};
  t.points = {{1'000'000, 20, 0, 0}, {4'000'000, 80, 0, 0}};
  return t;
}

// send/recv between 2 GPUs of one node: 15 us at 1 MB, 60 us at 4 MB; 2 us per step.
CollectiveTable send_table() {
  CollectiveTable t = all_reduce_table();
  t.collective = OpKind::send;
  t.group_size = 2;
  t.ranks_per_node = 2;
  t.fit = {2.0, {0.5, 0}};
  t.points = {{1'000'000, 15, 0, 0}, {4'000'000, 60, 0, 0}};
  return t;
}

sim::LinkParams unit_links() {
  sim::LinkParams links;
  links.bandwidth_GBps = {kIntraGBps, 50};
  links.efficiency = {SaturatingEfficiency{1.0, 0}, SaturatingEfficiency{1.0, 0}};
  return links;
}

TEST(MeasuredCollectivePlan, SplitsTheTableTimeIntoFittedLatencyAndAFlow) {
  const sim::CollectivePlan plan = sim::measured_collective_plan(all_reduce_table(), 2'000'000, unit_links());
  EXPECT_EQ(plan.algorithm, "measured");
  ASSERT_EQ(plan.phase_count, 1);
  EXPECT_EQ(plan.phases[0].latency_ns, 14'000);  // 14 steps of 1 us
  ASSERT_EQ(plan.phases[0].flow_count, 1);
  EXPECT_EQ(plan.phases[0].flows[0].links, sim::kIntraLink);
  EXPECT_NEAR(plan.phases[0].flows[0].bytes, 26'000 * kIntraGBps, 1e-3);  // the other 26 us at 100 B/ns
  EXPECT_NEAR(sim::isolated_time_ns(plan, 2e6, unit_links()), 40'000, 1e-6);

  // Below the table: the fit scaled to the first row, 20 * (14 + 17.5) / (14 + 35) us, all of it latency.
  const sim::CollectivePlan small = sim::measured_collective_plan(all_reduce_table(), 500'000, unit_links());
  EXPECT_EQ(small.phases[0].latency_ns, 12'857);
  EXPECT_NEAR(small.phases[0].flows[0].bytes, (20'000 * 31.5 / 49 - 12'857) * kIntraGBps, 1e-6);
  EXPECT_EQ(sim::measured_collective_plan(all_reduce_table(), 0, unit_links()).phase_count, 0);
}

TEST(MeasuredCollectives, FoundOnlyForTheirGpuAndExactPlacement) {
  Profile profile = test_profile();
  profile.collectives = {all_reduce_table(), send_table()};
  EXPECT_NE(sim::measured_collective(profile, "test gpu", OpKind::all_reduce, {8, 8, 1}), nullptr);
  EXPECT_EQ(sim::measured_collective(profile, "Other-GPU", OpKind::all_reduce, {8, 8, 1}), nullptr);
  EXPECT_EQ(sim::measured_collective(profile, "Test-GPU", OpKind::all_reduce, {8, 4, 2}), nullptr);
  EXPECT_EQ(sim::measured_collective(profile, "Test-GPU", OpKind::all_gather, {8, 8, 1}), nullptr);
  EXPECT_NE(sim::measured_point_to_point(profile, "Test-GPU", LinkKind::intra_node), nullptr);
  EXPECT_EQ(sim::measured_point_to_point(profile, "Test-GPU", LinkKind::inter_node), nullptr);
}

IterationGraph one_all_reduce(Bytes bytes, int group_size, int concurrent) {
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::tensor, group_size, group_size, 1);
  set_span(rank_class, GroupKind::data, group_size, group_size, 1);
  rank_class.add(collective_op(OpKind::all_reduce, GroupKind::tensor, group_size, bytes, Stream::tp_comm));
  if (concurrent > 1)
    rank_class.add(collective_op(OpKind::all_reduce, GroupKind::data, group_size, bytes, Stream::dp_comm));
  return graph;
}

TEST(MeasuredCollectives, SimulatedAloneTheyTakeTheTableTimeAndShareLinksLikeFlows) {
  Profile profile = test_profile();
  profile.collectives = {all_reduce_table()};
  const Cluster cluster = test_cluster(1);
  EXPECT_EQ(simulate(one_all_reduce(2'000'000, 8, 1), cluster, profile).iteration_ns, 40'000);
  // Two at once: both wait 14 us of latency, then their flows halve each other's share: 2 x 26 us.
  EXPECT_EQ(simulate(one_all_reduce(2'000'000, 8, 2), cluster, profile).iteration_ns, 14'000 + 52'000);
  // Unmeasured group size: NCCL's ring, 2 * 3/4 * 2 MB at 100 GB/s after its latency.
  EXPECT_NEAR(simulate(one_all_reduce(2'000'000, 4, 1), cluster, profile).iteration_ns,
              nccl_ring_alone_ns(OpKind::all_reduce, {4, 4, 1}, 2'000'000, kIntraGBps), 1.0);
  // A table of another GPU does not apply: ring over 8, 2 * 7/8 * 2 MB at 100 GB/s.
  profile.collectives = {all_reduce_table("Other-GPU")};
  EXPECT_NEAR(simulate(one_all_reduce(2'000'000, 8, 1), cluster, profile).iteration_ns,
              nccl_ring_alone_ns(OpKind::all_reduce, {8, 8, 1}, 2'000'000, kIntraGBps), 1.0);
}

TEST(MeasuredCollectives, PipelineTransfersUseTheSendRecvTable) {
  Profile profile = test_profile();
  profile.collectives = {send_table()};
  IterationGraph graph;
  add_class(graph, 0).add(pipeline_op(OpKind::send, 1, 7, 2'000'000));
  add_class(graph, 1).add(pipeline_op(OpKind::recv, 0, 7, 2'000'000));
  // 30 us at 2 MB (log-log between 15 and 60 us): 2 us latency, then 28 us of flow.
  EXPECT_EQ(simulate(graph, test_cluster(1), profile).iteration_ns, 30'000);
  profile.collectives.clear();
  EXPECT_EQ(simulate(graph, test_cluster(1), profile).iteration_ns, 20'000);  // model: 2 MB at 100 GB/s
}


// all_to_all over 2 GPUs of one node, one block per peer and in blocks: 100 us at 64 MB in one block, 160 us in 4,
// 400 us in 16 (log-log flat in size between the two rows, so these hold at every size between them).
CollectiveTable all_to_all_table(int blocks_per_peer, double time_us) {
  CollectiveTable t = send_table();
  t.collective = OpKind::all_to_all;
  t.blocks_per_peer = blocks_per_peer;
  t.points = {{32'000'000, time_us / 2, 0, 0}, {64'000'000, time_us, 0, 0}};
  return t;
}

double blocks_time_us(const Profile& profile, int blocks) {
  const sim::CollectivePlan plan =
      sim::measured_blocks_plan(profile, profile.collectives.front(), blocks, 64'000'000, unit_links());
  return sim::isolated_time_ns(plan, 64e6, unit_links()) / 1e3;
}

TEST(MeasuredCollectives, AnAllToAllInBlocksTakesItsTablesTimeBetweenAndBeyondThem) {
  Profile profile = test_profile();
  profile.collectives = {all_to_all_table(1, 100), all_to_all_table(4, 160), all_to_all_table(16, 400)};
  EXPECT_NEAR(blocks_time_us(profile, 1), 100, 1e-6);
  EXPECT_NEAR(blocks_time_us(profile, 4), 160, 1e-6);
  EXPECT_NEAR(blocks_time_us(profile, 16), 400, 1e-6);
  EXPECT_NEAR(blocks_time_us(profile, 2), 130, 1e-6);  // halfway in log(blocks) between 1 and 4
  EXPECT_NEAR(blocks_time_us(profile, 8), 280, 1e-6);  // halfway between 4 and 16
  EXPECT_NEAR(blocks_time_us(profile, 32), 720, 1e-6);  // linear in blocks through 4 and 16: 20 us a block
  // Tables of another placement or GPU do not apply; without tables in blocks, the one-block table's time.
  Profile other = profile;
  other.collectives[1].group_size = other.collectives[1].ranks_per_node = 4;
  other.collectives[2].gpu = "Other-GPU";
  EXPECT_NEAR(blocks_time_us(other, 8), 100, 1e-6);
  // The simulator prices an all_to_all op by its blocks per peer.
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::expert, 2, 2, 1);
  Op exchange = collective_op(OpKind::all_to_all, GroupKind::expert, 2, 64'000'000, Stream::ep_comm);
  exchange.blocks_per_peer = 8;
  rank_class.add(exchange);
  EXPECT_NEAR(simulate(graph, test_cluster(1), profile).iteration_ns, 280'000, 1.0);
}

}  // namespace
}  // namespace twin
