// The measured pace of a ring across nodes (sim/ring_pace.hpp) and where it binds in a ring's plan.
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "cost/profile.hpp"
#include "sim/collectives.hpp"
#include "sim/flat_graph.hpp"
#include "sim/ring_pace.hpp"

namespace twin::test {
namespace {

TEST(RingPace, ReproducesItsTwoFitPointsAndIsZeroInsideANode) {
  EXPECT_EQ(sim::ring_pace_floor_ns(OpKind::all_reduce, {8, 8, 1}), 0);
  EXPECT_NEAR(sim::ring_pace_floor_ns(OpKind::all_reduce, {16, 8, 2}), 156.9e3, 1e-6);     // nccl-tests #309
  EXPECT_NEAR(sim::ring_pace_floor_ns(OpKind::all_reduce, {1024, 8, 128}), 19355e3, 1e-3);  // nccl-tests #322
  // An all-gather takes half the all-reduce's steps; 16 nodes lie between the fit points, log2 in the nodes.
  const double step_us_16 = 156.9 / 30 + (19355.0 / 2046 - 156.9 / 30) / 6 * 3;
  EXPECT_NEAR(sim::ring_pace_floor_ns(OpKind::all_gather, {128, 8, 16}), 127 * step_us_16 * 1e3, 1e-6);
}

sim::LinkParams dgx_h100_links(int nodes) {
  NodeGroup group;
  group.gpu = *gpu_preset("H100-SXM-80GB");
  group.gpus_per_node = 8;
  group.count = nodes;
  group.intra_node = default_intra_node(group.gpu);
  group.nics = {8, 400, 0};
  return sim::link_params(group, Network{}, builtin_profile());
}

TEST(RingPace, BindsWhenTheRingIsLatencyBoundNotWhenItIsBandwidthBound) {
  const GroupSpan span{512, 8, 64};
  const sim::LinkParams links = dgx_h100_links(64);
  // A 96 MiB all-gather over 512 H100s: NCCL's model gives about 1.4 ms (LL128); the pace, 511 steps, 4.5 ms.
  const double gather = 96.0 * (1 << 20);
  const sim::CollectivePlan small = sim::tune_collective(OpKind::all_gather, static_cast<Bytes>(gather), span, links);
  EXPECT_NEAR(sim::isolated_time_ns(small, gather, links), sim::ring_pace_floor_ns(OpKind::all_gather, span), 1.0);
  // A 16 GiB all-gather is bandwidth-bound: its time is NCCL's latency plus its bytes, above the pace.
  const double large = 16.0 * (1 << 30);
  const sim::CollectivePlan big = sim::nccl_plan(sim::NcclAlgorithm::ring, sim::NcclProtocol::simple,
                                                 OpKind::all_gather, large, span, links);
  const double latency_ns = sim::nccl_latency_us(sim::NcclAlgorithm::ring, sim::NcclProtocol::simple,
                                                 OpKind::all_gather, span, {}) * 1e3;
  EXPECT_EQ(big.phases[0].latency_ns, static_cast<TimeNs>(std::llround(latency_ns)));
  EXPECT_GT(sim::isolated_time_ns(big, large, links), sim::ring_pace_floor_ns(OpKind::all_gather, span));
}

}  // namespace
}  // namespace twin::test
