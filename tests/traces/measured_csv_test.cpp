// ops.csv: exact bytes for a three-op class (a multi-kernel op, an under-predicted op, an absent op), rows
// ordered by rank whatever the order given, and mismatches rejected.
#include "traces/ops_csv.hpp"

#include <gtest/gtest.h>

#include "tests/traces/measured_kernels.hpp"

namespace twin {
namespace {

using testing::make_op;

// One class of three ops: fc1 forward, its TP all-reduce, the optimizer step.
IterationGraph three_op_graph() {
  IterationGraph graph;
  graph.classes.resize(1);
  RankClass& stage = graph.classes[0];
  stage.label = "stage 0";
  stage.add(make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 0, 0));
  stage.add(make_op(OpKind::all_reduce, OpRole::tp_reduce, Stream::tp_comm, 0, 0));
  stage.add(make_op(OpKind::optimizer_step, OpRole::optimizer, Stream::compute, -1, -1, Phase::optimizer));
  return graph;
}

PlanPrediction three_op_prediction() {
  PlanPrediction prediction;
  prediction.iteration_ns = 1750;
  prediction.class_finish_ns = {1750};
  prediction.ops = {{{0, 1000}, {1000, 500}, {1500, 250}}};
  return prediction;
}

// fc1: 1100 ns in one kernel (10% over); all-reduce: two kernels over 450 ns (10% under); optimizer: none.
MeasuredRank three_op_rank(int rank) {
  const IterationGraph graph = three_op_graph();
  return join_measured_ops(graph.classes[0],
                           {{"gemm", 0, 1100, 7, 0, 0}, {"ar_a", 1100, 1300, 13, 0, 1}, {"ar_b", 1350, 1550, 13, 0, 1}},
                           rank);
}

constexpr const char* kHeader =
    "op_id,rank,rank_class,name,kind,role,phase,layer,micro_batch,stream,predicted_start_ns,"
    "predicted_duration_ns,measured_median_ns,measured_min_ns,measured_max_ns,kernels,error,shared_gpu_iterations\r\n";

TEST(OpsCsv, ExactBytesForThreeOps) {
  const std::string csv = ops_csv(three_op_graph(), {three_op_rank(3)}, three_op_prediction());
  const std::string expected = std::string(kHeader) +
                               "0,3,0,L0.fc1.fwd.mb0,gemm,fc1,forward,0,0,compute,0,1000,1100,1100,1100,1,0.1000,0\r\n"
                               "1,3,0,L0.tp_reduce.fwd.mb0,all_reduce,tp_reduce,forward,0,0,tp,1000,500,450,450,450,2,"
                               "-0.1000,0\r\n"
                               "2,3,0,optimizer.opt,optimizer_step,optimizer,optimizer,-1,-1,compute,1500,250,,,,0,,0\r\n";
  EXPECT_EQ(csv, expected);
}

TEST(OpsCsv, HeaderMatchesTheColumnList) {
  std::string header;
  for (const std::string& column : ops_csv_columns()) header += (header.empty() ? "" : ",") + column;
  EXPECT_EQ(header + "\r\n", kHeader);
}

TEST(OpsCsv, RowsFollowRankOrderAndZeroPredictionsHaveNoError) {
  PlanPrediction prediction = three_op_prediction();
  prediction.ops[0][0].duration_ns = 0;  // a ratio to 0 is no error figure
  const std::string csv = ops_csv(three_op_graph(), {three_op_rank(9), three_op_rank(2)}, prediction);
  const std::size_t rank2 = csv.find("\r\n0,2,0,");
  const std::size_t rank9 = csv.find("\r\n0,9,0,");
  ASSERT_NE(rank2, std::string::npos);
  ASSERT_NE(rank9, std::string::npos);
  EXPECT_LT(rank2, rank9);
  EXPECT_NE(csv.find("\r\n0,2,0,L0.fc1.fwd.mb0,gemm,fc1,forward,0,0,compute,0,0,1100,1100,1100,1,,0\r\n"), std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);  // header + 2 ranks x 3 ops
}

TEST(OpsCsv, TwoStageRunHasARowPerRankAndOp) {
  const IterationGraph graph = testing::two_stage_graph();
  const std::vector<MeasuredRank> ranks = {join_measured_ops(graph.classes[0], testing::stage0_kernels(), 0),
                                           join_measured_ops(graph.classes[1], testing::stage1_kernels(), 4)};
  PlanPrediction prediction;
  prediction.iteration_ns = 7000;
  prediction.class_finish_ns = {7000, 5800};
  prediction.ops = {std::vector<PredictedOpTime>(7, {0, 1000}), std::vector<PredictedOpTime>(5, {0, 1000})};
  const std::string csv = ops_csv(graph, ranks, prediction);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 7 + 5);
  // c0.0: median of 1100 and 1200; kernels: the most in one iteration (3).
  EXPECT_NE(csv.find("\r\n0,0,0,L0.fc1.fwd.mb0,gemm,fc1,forward,0,0,compute,0,1000,1150,1100,1200,3,0.1500,0\r\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\r\n4,4,1,optimizer.opt,optimizer_step,optimizer,optimizer,-1,-1,compute,0,1000,1550,1200,1900,1,"
                     "0.5500,0\r\n"),
            std::string::npos)
      << csv;
}

TEST(OpsCsv, MismatchesAreRejected) {
  const IterationGraph graph = three_op_graph();
  EXPECT_THROW(ops_csv(graph, {three_op_rank(1), three_op_rank(1)}, three_op_prediction()), std::invalid_argument);
  MeasuredRank other_class = three_op_rank(1);
  other_class.rank_class = 1;
  EXPECT_THROW(ops_csv(graph, {other_class}, three_op_prediction()), std::invalid_argument);
  PlanPrediction short_prediction = three_op_prediction();
  short_prediction.ops[0].pop_back();
  EXPECT_THROW(ops_csv(graph, {three_op_rank(1)}, short_prediction), std::invalid_argument);
  MeasuredRank short_rank = three_op_rank(1);
  short_rank.ops.pop_back();
  EXPECT_THROW(ops_csv(graph, {short_rank}, three_op_prediction()), std::invalid_argument);
}

}  // namespace
}  // namespace twin
