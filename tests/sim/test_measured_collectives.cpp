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

}  // namespace
}  // namespace twin
