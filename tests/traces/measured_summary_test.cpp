// Predicted against measured: per-rank and overall iteration time (the slowest rank per iteration, then
// the median), and the per-kind table ranked by absolute contribution, all from hand-set records.
#include "traces/predicted_vs_measured.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "reports/best_plan.hpp"
#include "traces/ops_csv.hpp"
#include "tests/reports/report_fixture.hpp"
#include "tests/traces/measured_kernels.hpp"

namespace twin {
namespace {

// Stage 0 measured on rank 0, stage 1 on rank 4, predictions from best.json of two_stage_result():
// class 0 durations 1000 500 750 1001 2750 999 499 (finish 7000), class 1 2250 873 877 1000 800 (5800).
PredictedVsMeasured two_stage_comparison() {
  const IterationGraph graph = testing::two_stage_graph();
  const PlanPrediction prediction = read_plan_prediction(
      best_plan_json(testing::small_scenario(), testing::best_candidate(), graph), graph);
  // Given out of rank order on purpose.
  return predicted_vs_measured(graph,
                               {join_measured_ops(graph.classes[1], testing::stage1_kernels(), 4),
                                join_measured_ops(graph.classes[0], testing::stage0_kernels(), 0)},
                               prediction);
}

TEST(PredictedVsMeasured, IterationTimePerRankAndOverall) {
  const PredictedVsMeasured comparison = two_stage_comparison();
  ASSERT_EQ(comparison.ranks.size(), 2u);
  const RankComparison& rank0 = comparison.ranks[0];
  EXPECT_EQ(rank0.rank, 0);
  EXPECT_EQ(rank0.rank_class, 0);
  EXPECT_EQ(rank0.predicted_ns, 7000);
  EXPECT_EQ(rank0.measured_ns, 6850);  // spans 6600 and 7100
  ASSERT_TRUE(rank0.error);
  EXPECT_DOUBLE_EQ(*rank0.error, 6850.0 / 7000.0 - 1.0);
  const RankComparison& rank4 = comparison.ranks[1];
  EXPECT_EQ(rank4.rank, 4);
  EXPECT_EQ(rank4.predicted_ns, 5800);
  EXPECT_EQ(rank4.measured_ns, 6700);  // spans 6900 and 6500
  EXPECT_DOUBLE_EQ(*rank4.error, 6700.0 / 5800.0 - 1.0);

  // Iteration 3: max(6600, 6900) = 6900; iteration 4: max(7100, 6500) = 7100; median 7000. (The larger of
  // the per-rank medians would be 6850: the slowest rank changes between iterations.)
  EXPECT_EQ(comparison.predicted_iteration_ns, 7000);
  EXPECT_EQ(comparison.measured_iteration_ns, 7000);
  ASSERT_TRUE(comparison.error);
  EXPECT_DOUBLE_EQ(*comparison.error, 0.0);
}

TEST(PredictedVsMeasured, KindsRankedByAbsoluteContribution) {
  const PredictedVsMeasured comparison = two_stage_comparison();
  struct Row {
    OpKind kind;
    int ops;
    TimeNs predicted_ns, measured_ns;
    int unmeasured_ops;
    TimeNs unmeasured_predicted_ns;
  };
  // optimizer_step: c1.4 1550 vs 800 (c0.5 ran no kernel: 999 unmeasured); recv: c0.4 2500 + c1.0 2200 vs
  // 2750 + 2250; reduce_scatter 700 vs 499; gemm 1150 + 1050 vs 1000 + 1001; all_reduce 650 vs 500;
  // attention_backward 1000 vs 877; attention_forward 950 vs 873; send 800 + 1000 vs 750 + 1000.
  const std::vector<Row> expected = {
      {OpKind::optimizer_step, 1, 800, 1550, 1, 999},  {OpKind::recv, 2, 5000, 4700, 0, 0},
      {OpKind::reduce_scatter, 1, 499, 700, 0, 0},     {OpKind::gemm, 2, 2001, 2200, 0, 0},
      {OpKind::all_reduce, 1, 500, 650, 0, 0},         {OpKind::attention_backward, 1, 877, 1000, 0, 0},
      {OpKind::attention_forward, 1, 873, 950, 0, 0},  {OpKind::send, 2, 1750, 1800, 0, 0},
  };
  ASSERT_EQ(comparison.kinds.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const KindComparison& kind = comparison.kinds[i];
    SCOPED_TRACE(to_string(expected[i].kind));
    EXPECT_EQ(kind.kind, expected[i].kind);
    EXPECT_EQ(kind.ops, expected[i].ops);
    EXPECT_EQ(kind.predicted_ns, expected[i].predicted_ns);
    EXPECT_EQ(kind.measured_ns, expected[i].measured_ns);
    EXPECT_EQ(kind.error_contribution_ns(), expected[i].measured_ns - expected[i].predicted_ns);
    EXPECT_EQ(kind.unmeasured_ops, expected[i].unmeasured_ops);
    EXPECT_EQ(kind.unmeasured_predicted_ns, expected[i].unmeasured_predicted_ns);
    ASSERT_TRUE(kind.error);
    EXPECT_DOUBLE_EQ(*kind.error, static_cast<double>(expected[i].measured_ns) / expected[i].predicted_ns - 1.0);
  }
}

TEST(PredictedVsMeasured, EqualContributionsKeepKindOrderAndUnmeasuredKindsHaveNoError) {
  IterationGraph graph;
  graph.classes.resize(1);
  RankClass& stage = graph.classes[0];
  stage.add(testing::make_op(OpKind::all_reduce, OpRole::tp_reduce, Stream::tp_comm, 0, 0));
  stage.add(testing::make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 0, 0));
  stage.add(testing::make_op(OpKind::elementwise, OpRole::none, Stream::compute, 0, 0));
  PlanPrediction prediction;
  prediction.iteration_ns = 400;
  prediction.class_finish_ns = {400};
  prediction.ops = {{{0, 100}, {100, 100}, {200, 200}}};
  // all_reduce 150 (+50), gemm 50 (-50), elementwise: no kernel.
  const MeasuredRank rank = join_measured_ops(stage, {{"ar", 0, 150, 13, 0, 0}, {"g", 150, 200, 7, 0, 1}}, 0);
  const PredictedVsMeasured comparison = predicted_vs_measured(graph, {rank}, prediction);
  ASSERT_EQ(comparison.kinds.size(), 3u);
  EXPECT_EQ(comparison.kinds[0].kind, OpKind::gemm);  // |+-50| tie: enum order, gemm before all_reduce
  EXPECT_EQ(comparison.kinds[1].kind, OpKind::all_reduce);
  EXPECT_EQ(comparison.kinds[2].kind, OpKind::elementwise);
  EXPECT_EQ(comparison.kinds[2].ops, 0);
  EXPECT_EQ(comparison.kinds[2].unmeasured_predicted_ns, 200);
  EXPECT_FALSE(comparison.kinds[2].error);
  EXPECT_EQ(comparison.measured_iteration_ns, 200);
  EXPECT_DOUBLE_EQ(*comparison.error, 200.0 / 400.0 - 1.0);
}

TEST(PredictedVsMeasured, NothingMeasuredHasNoMeasuredIteration) {
  const IterationGraph graph = testing::two_stage_graph();
  PlanPrediction prediction;
  prediction.iteration_ns = 7000;
  prediction.class_finish_ns = {7000, 5800};
  prediction.ops = {std::vector<PredictedOpTime>(7), std::vector<PredictedOpTime>(5)};
  const PredictedVsMeasured comparison = predicted_vs_measured(graph, {}, prediction);
  EXPECT_FALSE(comparison.measured_iteration_ns);
  EXPECT_FALSE(comparison.error);
  EXPECT_TRUE(comparison.kinds.empty());
  const nlohmann::json json = to_json(comparison);
  EXPECT_TRUE(json["measured_iteration_ns"].is_null());
  EXPECT_TRUE(json["error"].is_null());
}

TEST(PredictedVsMeasured, JsonCarriesTheTables) {
  const nlohmann::json json = to_json(two_stage_comparison());
  EXPECT_EQ(json["predicted_iteration_ns"], 7000);
  EXPECT_EQ(json["measured_iteration_ns"], 7000);
  EXPECT_EQ(json["ranks"][1]["rank"], 4);
  EXPECT_EQ(json["ranks"][1]["measured_median_ns"], 6700);
  EXPECT_EQ(json["kinds"][0]["kind"], "optimizer_step");
  EXPECT_EQ(json["kinds"][0]["error_contribution_ns"], 750);
  EXPECT_EQ(json["kinds"][0]["unmeasured_predicted_ns"], 999);
  EXPECT_EQ(json["kinds"][1]["error_contribution_ns"], -300);
  EXPECT_EQ(json.dump(), to_json(two_stage_comparison()).dump());
}

TEST(PredictedVsMeasured, RepeatedOrMismatchedRanksAreRejected) {
  const IterationGraph graph = testing::two_stage_graph();
  const PlanPrediction prediction = read_plan_prediction(
      best_plan_json(testing::small_scenario(), testing::best_candidate(), graph), graph);
  const MeasuredRank rank0 = join_measured_ops(graph.classes[0], testing::stage0_kernels(), 0);
  EXPECT_THROW(predicted_vs_measured(graph, {rank0, rank0}, prediction), std::invalid_argument);
  MeasuredRank wrong_class = rank0;
  wrong_class.rank_class = 1;  // 7 measured ops against a 5-op class
  EXPECT_THROW(predicted_vs_measured(graph, {wrong_class}, prediction), std::invalid_argument);
}

// A rank that runs one class per part of the step (hot switching's phases) is listed once per class; its
// span in an iteration runs from its first class's first kernel to its last class's last.
TEST(PredictedVsMeasured, ARankRunningSeveralClassesSpansThemAll) {
  const IterationGraph graph = testing::two_stage_graph();
  const PlanPrediction prediction = read_plan_prediction(
      best_plan_json(testing::small_scenario(), testing::best_candidate(), graph), graph);
  const MeasuredRank first = join_measured_ops(graph.classes[0], testing::stage0_kernels(), 0);
  const MeasuredRank second = join_measured_ops(graph.classes[1], testing::stage1_kernels(), 0);
  const PredictedVsMeasured comparison = predicted_vs_measured(graph, {second, first}, prediction);
  ASSERT_EQ(comparison.ranks.size(), 2u);
  EXPECT_EQ(comparison.ranks[0].rank_class, 0);  // (rank, class) order
  EXPECT_EQ(comparison.ranks[1].rank_class, 1);
  std::vector<TimeNs> spans;
  for (std::size_t i = 0; i < first.iteration_spans.size(); ++i)
    spans.push_back(std::max(first.iteration_spans[i].end_ns, second.iteration_spans[i].end_ns) -
                    std::min(first.iteration_spans[i].start_ns, second.iteration_spans[i].start_ns));
  EXPECT_EQ(comparison.measured_iteration_ns, median_ns(spans));
  EXPECT_THROW(predicted_vs_measured(graph, {first, first}, prediction), std::invalid_argument);
  const std::string csv = ops_csv(graph, {second, first}, prediction);
  EXPECT_LT(csv.find("\r\n0,0,0,"), csv.find("\r\n0,0,1,"));  // rank 0's class 0 rows, then its class 1 rows
}

}  // namespace
}  // namespace twin
