// The numbers of `twin report`: on the recorded H200 runs, against sums computed by hand from their
// ops.csv and metrics.json; and on the hand-built two-stage run, the per-collective and contributor tables.
#include "reports/execution_summary.hpp"

#include <gtest/gtest.h>

#include "reports/best_plan.hpp"
#include "tests/reports/execution_fixture.hpp"
#include "tests/reports/report_fixture.hpp"
#include "tests/traces/measured_kernels.hpp"

namespace twin {
namespace {

const KindComparison& kind_row(const ExecutionSummary& summary, OpKind kind) {
  for (const KindComparison& row : summary.kinds)
    if (row.kind == kind) return row;
  throw std::logic_error("no row for " + to_string(kind));
}

TEST(ExecutionSummary, RecordedSevenBillionRun) {
  const ExecutedRun run = load_executed_run(testing::executed_fixture("7b4l-mbs1-h200"));
  const ExecutionSummary s = summarize_execution(run);
  // best.json predicted/iteration_ns; metrics.json measured/iteration_s = 0.06619471740722656.
  EXPECT_EQ(s.predicted_iteration_ns, 76212763);
  EXPECT_EQ(s.measured_iteration_ns, 66194717);
  ASSERT_TRUE(s.error);
  EXPECT_DOUBLE_EQ(*s.error, 66194717.0 / 76212763.0 - 1.0);
  EXPECT_EQ(s.measured_kernel_span_ns, 66190618);

  // The 51 gemm rows of ops.csv: sum of predicted_duration_ns and of measured_median_ns.
  const KindComparison& gemm = kind_row(s, OpKind::gemm);
  EXPECT_EQ(gemm.ops, 51);
  EXPECT_EQ(gemm.predicted_ns, 31406394);
  EXPECT_EQ(gemm.measured_ns, 29918237);
  // The kind moving most: the AdamW step, 20.124 ms predicted, 12.133 ms measured.
  EXPECT_EQ(s.kinds.front().kind, OpKind::optimizer_step);
  EXPECT_EQ(s.kinds.front().error_contribution_ns(), 12132542 - 20123689);
  // L3.mlp_residual.bwd ran no kernel (58640 ns predicted).
  EXPECT_EQ(kind_row(s, OpKind::elementwise).unmeasured_ops, 1);
  EXPECT_EQ(kind_row(s, OpKind::elementwise).unmeasured_predicted_ns, 58640);
  // Over the 113 measured rows.
  EXPECT_EQ(s.measured_op_predicted_ns, 76154123);
  EXPECT_EQ(s.measured_op_measured_ns, 65937145);

  ASSERT_EQ(s.contributors.size(), kTopContributors);
  EXPECT_EQ(s.contributors[0].kind, OpKind::optimizer_step);
  EXPECT_EQ(s.contributors[0].label(), "optimizer.opt");
  EXPECT_EQ(s.contributors[0].difference_ns(), 12132542 - 20123689);
  EXPECT_EQ(s.contributors[1].label(), "L3.core_attention.bwd");
  EXPECT_EQ(s.contributors[1].predicted_ns, 3658082);
  EXPECT_EQ(s.contributors[1].measured_ns, 3128655);
  EXPECT_EQ(s.contributors[2].kind, OpKind::embedding_backward);
  EXPECT_EQ(s.contributors[2].difference_ns(), 519421 - 99599);

  // One GPU: no collective at all.
  EXPECT_TRUE(s.collectives.empty());

  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].predicted_ns, 76212763);  // rank_classes[0].finish_ns
  EXPECT_EQ(s.ranks[0].measured_span_ns, 66190618);
  EXPECT_DOUBLE_EQ(*s.ranks[0].error, 66190618.0 / 76212763.0 - 1.0);
  EXPECT_EQ(s.ranks[0].median_step_ns, 66194717);

  ASSERT_EQ(s.steps.size(), 12u);
  EXPECT_TRUE(s.steps[0].warmup);
  EXPECT_TRUE(s.steps[2].warmup);
  EXPECT_FALSE(s.steps[3].warmup);
  EXPECT_EQ(s.steps[0].measured_ns, 131692764);
  EXPECT_EQ(s.steps[0].predicted_ns, 76212763);
  EXPECT_NEAR(*s.steps[11].loss, 4.4615478515625, 1e-12);
}

TEST(ExecutionSummary, RecordedSmallRunWithFourMicroBatches) {
  const ExecutedRun run = load_executed_run(testing::executed_fixture("small-single-h200"));
  const ExecutionSummary s = summarize_execution(run);
  EXPECT_EQ(s.predicted_iteration_ns, 13204518);
  const KindComparison& gemm = kind_row(s, OpKind::gemm);
  EXPECT_EQ(gemm.ops, 204);
  EXPECT_EQ(gemm.predicted_ns, 4785260);
  EXPECT_EQ(gemm.measured_ns, 4093017);
  // The four micro-batches of layer 0's attention backward, summed: the largest group.
  EXPECT_EQ(s.contributors.front().label(), "L0.core_attention.bwd");
  EXPECT_EQ(s.contributors.front().ops, 4);
  EXPECT_EQ(s.contributors.front().predicted_ns, 879892);
  EXPECT_EQ(s.contributors.front().measured_ns, 1567382);
  EXPECT_EQ(s.ranks[0].measured_span_ns, 16798844);
  EXPECT_FALSE(run.measured_iteration);  // this run kept no trace
}

// The hand-built two-stage run of tests/traces: rank 0 (class 0) and rank 4 (class 1).
ExecutionSummary two_stage_summary(std::size_t top) {
  const IterationGraph graph = testing::two_stage_graph();
  const PlanPrediction prediction =
      read_plan_prediction(best_plan_json(testing::small_scenario(), testing::best_candidate(), graph), graph);
  std::vector<MeasuredRank> ranks = {join_measured_ops(graph.classes[0], testing::stage0_kernels(), 0),
                                     join_measured_ops(graph.classes[1], testing::stage1_kernels(), 4)};
  RunMetrics metrics;
  metrics.measured_iteration_ns = 7100;
  metrics.steps = {{1, 10.5, 9000, false}, {2, 9.5, 7100, true}};
  metrics.ranks = {{0, 0, 7000, 6850, 1.0, 1.1}, {4, 1, 7100, 6700, 2.0, 2.1}};
  return summarize_execution(graph, prediction, ranks, metrics, top);
}

TEST(ExecutionSummary, CollectivesByKindAndCommunicator) {
  const ExecutionSummary s = two_stage_summary(kTopContributors);
  // Predicted durations: class 0 1000 500 750 1001 2750 999 499, class 1 2250 873 877 1000 800.
  ASSERT_EQ(s.collectives.size(), 4u);
  const CollectiveComparison& all_reduce = s.collectives[0];  // c0.1: 600 / 700 -> 650
  EXPECT_EQ(all_reduce.kind, OpKind::all_reduce);
  EXPECT_EQ(all_reduce.group, GroupKind::tensor);
  EXPECT_EQ(all_reduce.ops, 1);
  EXPECT_EQ(all_reduce.bytes, 32 * 1024 * 1024);
  EXPECT_EQ(all_reduce.predicted_ns, 500);
  EXPECT_EQ(all_reduce.measured_ns, 650);
  const CollectiveComparison& reduce_scatter = s.collectives[1];  // c0.6: 600 / 800 -> 700
  EXPECT_EQ(reduce_scatter.kind, OpKind::reduce_scatter);
  EXPECT_EQ(reduce_scatter.group, GroupKind::data);
  EXPECT_EQ(reduce_scatter.predicted_ns, 499);
  EXPECT_EQ(reduce_scatter.measured_ns, 700);
  const CollectiveComparison& send = s.collectives[2];  // c0.2 800 and c1.3 1000
  EXPECT_EQ(send.kind, OpKind::send);
  EXPECT_EQ(send.group, GroupKind::pipeline);
  EXPECT_EQ(send.ops, 2);
  EXPECT_EQ(send.predicted_ns, 750 + 1000);
  EXPECT_EQ(send.measured_ns, 800 + 1000);
  const CollectiveComparison& recv = s.collectives[3];  // c0.4 2500 and c1.0 2000 / 2400 -> 2200
  EXPECT_EQ(recv.kind, OpKind::recv);
  EXPECT_EQ(recv.predicted_ns, 2750 + 2250);
  EXPECT_EQ(recv.measured_ns, 2500 + 2200);
  EXPECT_DOUBLE_EQ(*recv.error, 4700.0 / 5000.0 - 1.0);
}

TEST(ExecutionSummary, ContributorsRankedByAbsoluteDifferenceTiesByKey) {
  const ExecutionSummary s = two_stage_summary(5);
  // Differences: optimizer (c1.4) 1550 - 800 = +750; recv pipeline_gradient 2500 - 2750 = -250; reduce_scatter
  // +201; gemm fc1 fwd 1150 - 1000 = +150 and all_reduce +150 (a tie: gemm comes first in kind order).
  ASSERT_EQ(s.contributors.size(), 5u);
  EXPECT_EQ(s.contributors[0].kind, OpKind::optimizer_step);
  EXPECT_EQ(s.contributors[0].difference_ns(), 750);
  EXPECT_EQ(s.contributors[0].ops, 1);  // c0.5 ran no kernel
  EXPECT_EQ(s.contributors[1].label(), "pipeline_gradient.fwd");  // make_p2p leaves the phase forward
  EXPECT_EQ(s.contributors[1].difference_ns(), -250);
  EXPECT_EQ(s.contributors[2].kind, OpKind::reduce_scatter);
  EXPECT_EQ(s.contributors[2].difference_ns(), 201);
  EXPECT_EQ(s.contributors[3].label(), "L0.fc1.fwd");
  EXPECT_EQ(s.contributors[4].kind, OpKind::all_reduce);
  EXPECT_EQ(s.contributors[4].difference_ns(), 150);
}

TEST(ExecutionSummary, RanksStepsAndPoints) {
  const ExecutionSummary s = two_stage_summary(kTopContributors);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[1].rank, 4);
  EXPECT_EQ(s.ranks[1].predicted_ns, 5800);
  EXPECT_DOUBLE_EQ(*s.ranks[1].error, 6700.0 / 5800.0 - 1.0);
  ASSERT_EQ(s.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(*s.steps[0].error, 9000.0 / 7000.0 - 1.0);
  EXPECT_TRUE(s.steps[0].warmup);
  EXPECT_DOUBLE_EQ(*s.error, 7100.0 / 7000.0 - 1.0);

  const IterationGraph graph = testing::two_stage_graph();
  const PlanPrediction prediction =
      read_plan_prediction(best_plan_json(testing::small_scenario(), testing::best_candidate(), graph), graph);
  const std::vector<OpPoint> points =
      op_points(graph, prediction, {join_measured_ops(graph.classes[1], testing::stage1_kernels(), 4),
                                    join_measured_ops(graph.classes[0], testing::stage0_kernels(), 0)});
  // 6 measured ops of rank 0 (c0.5 absent), then the 5 of rank 4.
  ASSERT_EQ(points.size(), 11u);
  EXPECT_EQ(points[0].rank, 0);
  EXPECT_EQ(points[5].op, 6u);
  EXPECT_EQ(points[6].rank, 4);
  EXPECT_EQ(points[10].measured_ns, 1550);
}

}  // namespace
}  // namespace twin
