// The interference grid of a flattened iteration (sim/interference_grid.hpp): one row and band of scalars without
// measured points; with them, a row per collective kind and bucketed size, a band per compute class and bucketed
// kernel waves (a grouped GEMM by one group's), each entry the profile's pair; and the engine pricing an overlap
// by the pair of the ops that overlap.
#include <gtest/gtest.h>

#include "sim/interference_grid.hpp"
#include "sim/simulate.hpp"
#include "sim_test_world.hpp"

namespace twin::test {
namespace {

InterferencePoint point(OpKind kind, Bytes size, InterferenceCompute beside, double waves, double compute, double comm) {
  return {kind, size, beside, waves, compute, comm};
}

Op gemm_op(std::int64_t m, std::int64_t n, std::int64_t k, int count = 1) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = GemmShape{m, n, k, count};
  op.flops = 2.0 * m * n * k * count;
  return op;
}

TEST(InterferenceGrid, WithoutPointsOneEntryOfTheScalars) {
  OverlapProfile overlap{1.3, 1.2, {}};
  sim::InterferenceIndex index(overlap);
  EXPECT_EQ(index.row_of(collective_op(OpKind::all_gather, GroupKind::data, 2, 1 << 24, Stream::dp_comm)), 0);
  index.set_sm_count(132);
  EXPECT_EQ(index.band_of(gemm_op(4096, 4096, 4096)), 0);
  const sim::InterferenceGrid grid = index.grid();
  EXPECT_EQ(grid.compute(0, 0), 1.3);
  EXPECT_EQ(grid.communication(0, 0), 1.2);
  EXPECT_FALSE(grid.several_rows);
  EXPECT_TRUE(grid.any_communication_slowdown);
}

TEST(InterferenceGrid, RowsByKindAndSizeBandsByClassAndKernelFlops) {
  OverlapProfile overlap{1.3, 1.2,
                         {point(OpKind::all_gather, 1 << 20, InterferenceCompute::gemm, 0.25, 1.1, 1.2),
                          point(OpKind::all_gather, 1 << 20, InterferenceCompute::gemm, 16, 1.4, 1.6),
                          point(OpKind::all_gather, 1 << 20, InterferenceCompute::memory_bound, 0, 1.05, 1.7)}};
  sim::InterferenceIndex index(overlap);
  index.set_sm_count(128);
  const Op gather = collective_op(OpKind::all_gather, GroupKind::data, 2, 1 << 20, Stream::dp_comm);
  const Op reduce = collective_op(OpKind::all_reduce, GroupKind::data, 2, 1 << 20, Stream::dp_comm);
  const std::uint8_t gather_row = index.row_of(gather), reduce_row = index.row_of(reduce);
  EXPECT_NE(gather_row, reduce_row);
  // Sizes outside the measured range share the edge's row.
  Op larger = gather;
  larger.bytes = 1 << 28;
  EXPECT_EQ(index.row_of(larger), gather_row);
  // 16 waves of 128 x 256 tiles on 128 SMs as one GEMM (8192 x 8192), and 64 groups of a quarter wave each.
  const Op large = gemm_op(8192, 8192, 4096);
  const Op grouped = gemm_op(512, 2048, 4096, 64);
  const std::uint8_t large_band = index.band_of(large), grouped_band = index.band_of(grouped);
  const std::uint8_t norm_band = index.band_of(compute_op(1 << 20));
  const sim::InterferenceGrid grid = index.grid();
  EXPECT_NEAR(grid.compute(gather_row, large_band), 1.4, 1e-9);
  EXPECT_NEAR(grid.compute(gather_row, grouped_band), 1.1, 1e-9);
  EXPECT_NEAR(grid.communication(gather_row, norm_band), 1.7, 1e-9);
  // An all-reduce has no points: the scalars.
  EXPECT_EQ(grid.compute(reduce_row, large_band), 1.3);
  EXPECT_EQ(grid.communication(reduce_row, norm_band), 1.2);
  EXPECT_TRUE(grid.several_rows);
}

// The engine's closed form of Engine.OverlapSlowsComputeAndCommunicationByTheProfileFactors, with the factors
// coming from the measured pair of a send beside a memory-bound op, not from the scalars (1.01).
TEST(InterferenceGrid, TheEngineSlowsAnOverlapByItsMeasuredPair) {
  Profile profile = test_profile();
  profile.overlap = {1.01, 1.01,
                     {point(OpKind::send, 1'000'000, InterferenceCompute::memory_bound, 0, 1.5, 2.0),
                      point(OpKind::send, 1'000'000, InterferenceCompute::gemm, 1.0, 3.0, 3.0)}};
  IterationGraph graph;
  RankClass& rank_class = add_class(graph, 0);
  set_span(rank_class, GroupKind::context, 2, 2, 1);
  const Op compute = compute_op(1'000'000);
  rank_class.add(compute);
  rank_class.add(ring_send_op(1'000'000));  // 10 us alone at 100 GB/s
  const TimeNs t_compute = duration_of(profile, compute);
  ASSERT_EQ(t_compute % 2, 0);
  const auto timings = simulate(graph, test_cluster(1), profile).classes[0].op_timings;
  const TimeNs compute_end = t_compute * 3 / 2;
  EXPECT_EQ(timings[0].end_ns, compute_end);
  const double bytes_during_compute = compute_end * kIntraGBps / 2.0;
  EXPECT_EQ(timings[1].end_ns, compute_end + static_cast<TimeNs>((1'000'000 - bytes_during_compute) / kIntraGBps));
}

}  // namespace
}  // namespace twin::test
