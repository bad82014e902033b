// NCCL's ceilings on a protocol's bus bandwidth (sim/nccl_caps.hpp) and what they change in the tuner's choice.
#include <cmath>

#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "cost/profile.hpp"
#include "sim/collectives.hpp"
#include "sim/flat_graph.hpp"

namespace twin::test {
namespace {

using sim::NcclAlgorithm, sim::NcclGeneration, sim::NcclProtocol;

TEST(NcclCaps, GenerationFollowsTheGpuFamily) {
  EXPECT_EQ(sim::nccl_generation("H100-SXM-80GB"), NcclGeneration::hopper);
  EXPECT_EQ(sim::nccl_generation("H200-SXM-141GB"), NcclGeneration::hopper);
  EXPECT_EQ(sim::nccl_generation("A100-SXM-40GB"), NcclGeneration::ampere);
  EXPECT_EQ(sim::nccl_generation("RTX-4090"), NcclGeneration::ampere);  // Ada: compute capability 8.9
  EXPECT_EQ(sim::nccl_generation("B200"), NcclGeneration::blackwell);
  EXPECT_EQ(sim::nccl_generation("Test-GPU"), NcclGeneration::unknown);
}

TEST(NcclCaps, CeilingsAreTuningCcsConstants) {
  // tuning.cc:177-211 (NCCL 2.30.7): llMaxBw by node count (Hopper on one node, Intel hosts across nodes),
  // per-channel LL128 and tree ceilings times the channels (8 NICs: 8).
  const GroupSpan one_node{8, 8, 1}, two_nodes{16, 8, 2}, many_nodes{512, 8, 64};
  EXPECT_EQ(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll, one_node, NcclGeneration::hopper, 8), 141.0);
  EXPECT_EQ(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll, one_node, NcclGeneration::ampere, 8), 87.7);
  EXPECT_EQ(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll, two_nodes, NcclGeneration::hopper, 8), 39.0);
  EXPECT_EQ(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll, many_nodes, NcclGeneration::ampere, 8), 20.4);
  EXPECT_NEAR(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll128, many_nodes, NcclGeneration::hopper, 8),
              8 * 36.7, 1e-9);
  EXPECT_NEAR(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll128, many_nodes, NcclGeneration::ampere, 8),
              8 * 20.0, 1e-9);
  EXPECT_TRUE(std::isinf(
      sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll128, one_node, NcclGeneration::hopper, 8)));
  EXPECT_TRUE(std::isinf(
      sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::simple, many_nodes, NcclGeneration::hopper, 8)));
  EXPECT_NEAR(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::tree, NcclProtocol::simple, many_nodes, NcclGeneration::ampere, 8),
              8 * 17.8, 1e-9);
  EXPECT_NEAR(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::tree, NcclProtocol::simple, two_nodes, NcclGeneration::hopper, 8),
              8 * 41.4, 1e-9);
  EXPECT_EQ(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::tree, NcclProtocol::ll, many_nodes, NcclGeneration::hopper, 8), 20.4);
  EXPECT_NEAR(sim::nccl_bus_ceiling_GBps(NcclAlgorithm::tree, NcclProtocol::ll128, many_nodes, NcclGeneration::hopper, 8),
              8 * 29.0, 1e-9);
  EXPECT_TRUE(std::isinf(
      sim::nccl_bus_ceiling_GBps(NcclAlgorithm::ring, NcclProtocol::ll, many_nodes, NcclGeneration::unknown, 8)));
}

// The links of a DGX H100 node in the built-in profile.
sim::LinkParams dgx_h100_links() {
  NodeGroup group;
  group.gpu = *gpu_preset("H100-SXM-80GB");
  group.gpus_per_node = 8;
  group.count = 64;
  group.intra_node = default_intra_node(group.gpu);
  group.nics = {8, 400, 0};
  return sim::link_params(group, Network{}, builtin_profile());
}

TEST(NcclCaps, LlAcrossManyNodesIsNoLongerTheLinksHalf) {
  // A 96 MiB all-gather (a 1.3B model's layer in bf16, FSDP) over 512 H100s: without the ceiling LL delivered half
  // of the links' 360 GB/s of bus bandwidth; at NCCL's 20.4 GB/s its NIC flow carries the ring's traffic stretched
  // by 360 / 20.4, and the tuner no longer runs it.
  const sim::LinkParams links = dgx_h100_links();
  ASSERT_EQ(links.generation, NcclGeneration::hopper);
  ASSERT_EQ(links.net_channels, 8);
  const GroupSpan span{512, 8, 64};
  const double bytes = 96.0 * (1 << 20), traffic = 511 * bytes / 512;
  const sim::CollectivePlan ll = sim::nccl_plan(NcclAlgorithm::ring, NcclProtocol::ll, OpKind::all_gather, bytes, span, links);
  ASSERT_EQ(ll.phases[0].flow_count, 2);
  EXPECT_NEAR(ll.phases[0].flows[1].bytes, traffic / 8 * (360.0 / 20.4), traffic * 1e-9);
  EXPECT_GE(sim::isolated_time_ns(ll, bytes, links), traffic / 20.4);
  EXPECT_NE(sim::tune_collective(OpKind::all_gather, static_cast<Bytes>(bytes), span, links).protocol, "LL");
  // Without a known generation there is no ceiling: LL at half the links.
  sim::LinkParams unknown = links;
  unknown.generation = NcclGeneration::unknown;
  const sim::CollectivePlan free_ll =
      sim::nccl_plan(NcclAlgorithm::ring, NcclProtocol::ll, OpKind::all_gather, bytes, span, unknown);
  EXPECT_NEAR(free_ll.phases[0].flows[1].bytes, traffic / 8 / 0.5, traffic * 1e-9);
}

TEST(NcclCaps, Ll128AcrossNodesRunsAtItsPerChannelCeiling) {
  // 8 channels x 36.7 GB/s = 293.6 GB/s of bus bandwidth, below 0.92 of the links' 360: a 1 GiB reduce-scatter's
  // LL128 flows carry the ring's traffic stretched by 360 / 293.6 rather than 1 / 0.92.
  const sim::LinkParams links = dgx_h100_links();
  const GroupSpan span{64, 8, 8};
  const double bytes = 1 << 30;
  const sim::CollectivePlan ll128 =
      sim::nccl_plan(NcclAlgorithm::ring, NcclProtocol::ll128, OpKind::reduce_scatter, bytes, span, links);
  const double traffic = 63 * bytes / 64;
  ASSERT_EQ(ll128.phases[0].flow_count, 2);
  const double inter = ll128.phases[0].flows[1].bytes;
  EXPECT_NEAR(inter, traffic / 8 * (360.0 / 293.6), traffic * 1e-9);
}

}  // namespace
}  // namespace twin::test
