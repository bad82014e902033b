// Joining measured kernels to ops: region ids round-trip, multi-kernel ops span first start to last end,
// absent ops stay absent, medians over iterations, per-iteration spans, and bad records are rejected.
#include "traces/measured_ops.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "tests/traces/measured_kernels.hpp"

namespace twin {
namespace {

using testing::stage0_kernels;
using testing::two_stage_graph;

TEST(MeasuredRegion, EncodesIterationAndOpPlusOne) {
  EXPECT_EQ(encode_region(0, 0), (std::uint64_t{1} << 32) | 1u);
  EXPECT_EQ(encode_region(4, 17), (std::uint64_t{5} << 32) | 18u);
  const RegionId id = decode_region((std::uint64_t{5} << 32) | 18u);
  EXPECT_EQ(id.iteration, 4);
  EXPECT_EQ(id.op, 17u);
  const RegionId round_trip = decode_region(encode_region(123456, 4'000'000'000u));
  EXPECT_EQ(round_trip.iteration, 123456);
  EXPECT_EQ(round_trip.op, 4'000'000'000u);
}

TEST(MeasuredRegion, ZeroIsNoRegionAndHalfIdsAreRejected) {
  const RegionId none = decode_region(0);
  EXPECT_EQ(none.iteration, -1);
  EXPECT_EQ(none.op, kNoOp);
  EXPECT_THROW(decode_region(7), std::invalid_argument);                      // no iteration half
  EXPECT_THROW(decode_region(std::uint64_t{3} << 32), std::invalid_argument);  // no op half
  EXPECT_THROW(decode_region(std::uint64_t{0x80000001} << 32 | 1u), std::invalid_argument);  // iteration > INT32_MAX
  EXPECT_THROW(encode_region(-1, 0), std::invalid_argument);
  EXPECT_THROW(encode_region(0, kNoOp), std::invalid_argument);
}

TEST(MeasuredRegion, MeasuredKernelDecodesTheRecordRegion) {
  const MeasuredKernel inside = measured_kernel("k", 100, 250, 7, encode_region(2, 5));
  EXPECT_EQ(inside.name, "k");
  EXPECT_EQ(inside.start_ns, 100);
  EXPECT_EQ(inside.end_ns, 250);
  EXPECT_EQ(inside.stream_id, 7u);
  EXPECT_EQ(inside.iteration, 2);
  EXPECT_EQ(inside.op, 5u);
  EXPECT_FALSE(measured_kernel("setup", 0, 1, 7, 0).in_op());
}

TEST(MeasuredMedian, OddTakesTheMiddleEvenTheLowerMidpoint) {
  EXPECT_EQ(median_ns({30, 10, 20}), 20);
  EXPECT_EQ(median_ns({201, 100}), 150);  // 150.5 rounds down
  EXPECT_EQ(median_ns({5, 1, 9, 7}), 6);
  EXPECT_EQ(median_ns({42}), 42);
  EXPECT_THROW(median_ns({}), std::invalid_argument);
}

TEST(MeasuredJoin, MultiKernelOpSpansFirstStartToLastEnd) {
  const MeasuredRank rank = join_measured_ops(two_stage_graph().classes[0], stage0_kernels(), 0);
  ASSERT_EQ(rank.iterations, (std::vector<std::int32_t>{3, 4}));
  ASSERT_EQ(rank.ops.size(), 7u);
  const OpMeasurement& fc1 = rank.ops[0];
  EXPECT_EQ(fc1.duration_ns, (std::vector<std::optional<TimeNs>>{1100, 1200}));  // gaps between kernels count
  EXPECT_EQ(fc1.median_ns, 1150);
  EXPECT_EQ(fc1.min_ns, 1100);
  EXPECT_EQ(fc1.max_ns, 1200);
  EXPECT_EQ(fc1.kernels, 3);
  EXPECT_EQ(fc1.stream_ids, (std::vector<std::uint32_t>{testing::kComputeStream}));
  EXPECT_EQ(rank.ops[1].median_ns, 650);
  EXPECT_EQ(rank.ops[2].median_ns, 800);
  EXPECT_EQ(rank.ops[3].median_ns, 1050);
  EXPECT_EQ(rank.ops[4].median_ns, 2500);
  EXPECT_EQ(rank.ops[6].median_ns, 700);
  EXPECT_EQ(rank.ops[6].kernels, 1);
}

TEST(MeasuredJoin, OpWithoutKernelsIsAbsent) {
  const MeasuredRank rank = join_measured_ops(two_stage_graph().classes[0], stage0_kernels(), 0);
  const OpMeasurement& optimizer = rank.ops[5];
  EXPECT_FALSE(optimizer.median_ns);
  EXPECT_FALSE(optimizer.min_ns);
  EXPECT_FALSE(optimizer.max_ns);
  EXPECT_EQ(optimizer.kernels, 0);
  EXPECT_EQ(optimizer.duration_ns, (std::vector<std::optional<TimeNs>>{std::nullopt, std::nullopt}));
  EXPECT_TRUE(optimizer.stream_ids.empty());
}

TEST(MeasuredJoin, IterationSpansAndTheirMedian) {
  const MeasuredRank rank = join_measured_ops(two_stage_graph().classes[0], stage0_kernels(), 2);
  EXPECT_EQ(rank.rank, 2);
  EXPECT_EQ(rank.rank_class, 0);
  ASSERT_EQ(rank.iteration_spans.size(), 2u);
  EXPECT_EQ(rank.iteration_spans[0].iteration, 3);
  EXPECT_EQ(rank.iteration_spans[0].start_ns, testing::kBaseNs);
  EXPECT_EQ(rank.iteration_spans[0].span_ns(), 6600);  // the memset outside any op is not in it
  EXPECT_EQ(rank.iteration_spans[1].span_ns(), 7100);
  EXPECT_EQ(rank.median_iteration_ns, 6850);
  EXPECT_EQ(rank.kernels_outside_ops, 1);
}

TEST(MeasuredJoin, OddIterationCountAndAnOpMissingInOneIteration) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  std::vector<MeasuredKernel> kernels = {
      testing::kernel("g", 0, 0, 0, 300, 7),    testing::kernel("g", 1, 0, 0, 100, 7),
      testing::kernel("g", 2, 0, 0, 200, 7),    testing::kernel("ar", 0, 1, 300, 400, 13),
      testing::kernel("ar", 2, 1, 200, 260, 13),
  };
  const MeasuredRank rank = join_measured_ops(stage0, kernels, 0);
  EXPECT_EQ(rank.iterations, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(rank.ops[0].median_ns, 200);
  EXPECT_EQ(rank.ops[0].min_ns, 100);
  EXPECT_EQ(rank.ops[0].max_ns, 300);
  EXPECT_EQ(rank.ops[1].duration_ns, (std::vector<std::optional<TimeNs>>{100, std::nullopt, 60}));
  EXPECT_EQ(rank.ops[1].median_ns, 80);  // over the two iterations it ran in
  EXPECT_EQ(rank.median_iteration_ns, 260);  // spans 400, 100, 260
}

TEST(MeasuredJoin, RecordOrderDoesNotMatter) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  std::vector<MeasuredKernel> kernels = stage0_kernels();
  const MeasuredRank forward = join_measured_ops(stage0, kernels, 0);
  std::reverse(kernels.begin(), kernels.end());
  const MeasuredRank backward = join_measured_ops(stage0, kernels, 0);
  for (OpIndex i = 0; i < stage0.size(); ++i) {
    EXPECT_EQ(forward.ops[i].duration_ns, backward.ops[i].duration_ns) << i;
    EXPECT_EQ(forward.ops[i].kernels, backward.ops[i].kernels) << i;
  }
  EXPECT_EQ(forward.median_iteration_ns, backward.median_iteration_ns);
}

TEST(MeasuredJoin, AnOpSpreadOverTwoStreamsListsBoth) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  const MeasuredRank rank = join_measured_ops(
      stage0, {testing::kernel("a", 0, 1, 0, 10, 13), testing::kernel("b", 0, 1, 5, 30, 9)}, 0);
  EXPECT_EQ(rank.ops[1].stream_ids, (std::vector<std::uint32_t>{9, 13}));
  EXPECT_EQ(rank.ops[1].median_ns, 30);
}

// Double strand: a compute op whose span overlaps the span of another stream's compute op shared the GPU in that
// iteration (both are marked), also when their kernels took turns; so did one beside a NCCL kernel (the
// communication op itself is not marked); spans that only touch do not count.
TEST(MeasuredJoin, ComputeBesideAnotherStreamsComputeOrNcclSharedTheGpu) {
  RankClass rc;
  rc.add(testing::make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 1, 1));                      // 0
  rc.add(testing::make_op(OpKind::gemm, OpRole::fc2, Stream::compute2, 3, 0, Phase::backward));   // 1
  rc.add(testing::make_op(OpKind::all_reduce, OpRole::tp_reduce, Stream::tp_comm, 1, 1));          // 2
  rc.add(testing::make_op(OpKind::gemm, OpRole::fc2, Stream::compute, 1, 1));                      // 3
  const MeasuredRank rank = join_measured_ops(
      rc,
      {testing::kernel("a", 0, 0, 0, 100, 1), testing::kernel("b", 0, 1, 50, 150, 2),
       testing::kernel("nccl", 0, 2, 60, 400, 3), testing::kernel("c", 0, 3, 200, 300, 1),
       // the next iteration: one after the other, the second starting as the first ends
       testing::kernel("a", 1, 0, 1000, 1100, 1), testing::kernel("b", 1, 1, 1100, 1200, 2),
       // a long kernel of op 1 that started first, beside two short ones of op 3
       testing::kernel("b", 1, 1, 1300, 1900, 2), testing::kernel("c", 1, 3, 1400, 1500, 1),
       testing::kernel("c", 1, 3, 1600, 1700, 1),
       // a third: op 0's two kernels with op 1's one between them, none at the same time as another
       testing::kernel("a", 2, 0, 3000, 3010, 1), testing::kernel("b", 2, 1, 3015, 3025, 2),
       testing::kernel("a", 2, 0, 3030, 3040, 1)},
      0);
  EXPECT_EQ(rank.ops[0].shared_gpu_iterations, 2);
  EXPECT_EQ(rank.ops[1].shared_gpu_iterations, 3);
  EXPECT_EQ(rank.ops[2].shared_gpu_iterations, 0);
  EXPECT_EQ(rank.ops[3].shared_gpu_iterations, 2);  // beside the all-reduce, then beside op 1's long kernel
}

// Transformer Engine's userbuffers copy with the copy engines (no SM of the GEMM's): a GEMM beside one ran alone.
TEST(MeasuredJoin, ComputeBesideACopyEngineTransferRanAlone) {
  RankClass rc;
  rc.add(testing::make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 1, 1));  // 0
  Op ring_step = testing::make_op(OpKind::send, OpRole::tp_gather, Stream::tp_comm, 1, 1);
  ring_step.group = GroupKind::tensor;
  ring_step.comm_kernel = CommKernel::userbuffers_copy_engine;
  ring_step.transfer = Transfer::tensor_ring;
  rc.add(ring_step);                                                             // 1
  const MeasuredRank rank = join_measured_ops(
      rc, {testing::kernel("gemm", 0, 0, 0, 100, 1), testing::kernel("copy", 0, 1, 10, 90, 3)}, 0);
  EXPECT_EQ(rank.ops[0].shared_gpu_iterations, 0);
}

TEST(MeasuredJoin, OpIndexOutsideTheClassIsAClearError) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];  // 7 ops: 0..6
  std::vector<MeasuredKernel> kernels = stage0_kernels();
  kernels.push_back(testing::kernel("stray", 4, 7, 7200, 7300, 7));
  try {
    join_measured_ops(stage0, kernels, 5);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'stray'"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 5"), std::string::npos) << message;
    EXPECT_NE(message.find("op index 7"), std::string::npos) << message;
    EXPECT_NE(message.find("has 7 ops"), std::string::npos) << message;
  }
  // The last valid index passes.
  kernels.back().op = 6;
  EXPECT_NO_THROW(join_measured_ops(stage0, kernels, 5));
}

TEST(MeasuredJoin, InconsistentRecordsAreRejected) {
  const IterationGraph graph = two_stage_graph();
  const RankClass& stage0 = graph.classes[0];
  MeasuredKernel no_iteration{"k", 0, 10, 7, -1, 2};
  EXPECT_THROW(join_measured_ops(stage0, {no_iteration}, 0), std::invalid_argument);
  MeasuredKernel no_op{"k", 0, 10, 7, 3, kNoOp};
  EXPECT_THROW(join_measured_ops(stage0, {no_op}, 0), std::invalid_argument);
  MeasuredKernel backwards{"k", 10, 9, 7, 3, 2};
  EXPECT_THROW(join_measured_ops(stage0, {backwards}, 0), std::invalid_argument);
}

TEST(MeasuredJoin, NoRecordsGiveNoIterations) {
  const MeasuredRank rank = join_measured_ops(two_stage_graph().classes[1], {}, 4);
  EXPECT_TRUE(rank.iterations.empty());
  EXPECT_FALSE(rank.median_iteration_ns);
  ASSERT_EQ(rank.ops.size(), 5u);
  EXPECT_FALSE(rank.ops[0].median_ns);
}

}  // namespace
}  // namespace twin
