// execution_report.html: both timelines and the scatter are there, the bytes repeat, nothing reaches the
// network, and the pictures stay bounded whatever the op count.
#include "reports/execution_report.hpp"

#include <gtest/gtest.h>

#include "reports/best_plan.hpp"
#include "reports/execution_charts.hpp"
#include "tests/reports/execution_fixture.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

using testing::count;

TEST(ExecutionReport, HasHeadlineTablesScatterAndBothTimelines) {
  const ExecutedRun run = load_executed_run(testing::executed_fixture("7b4l-mbs1-h200"));
  ASSERT_TRUE(run.measured_iteration);
  EXPECT_EQ(run.measured_iteration->iteration, 9);  // spans of iterations 3..11; 66190618 ns is the median
  EXPECT_EQ(run.measured_iteration->span_ns, 66190618);
  EXPECT_EQ(run.measured_iteration->measured_iterations, 9);
  EXPECT_EQ(run.measured_iteration->kernels.size(), 206u);
  EXPECT_EQ(run.measured_iteration->kernels.front().start_ns, 0);
  ASSERT_EQ(run.measured_iteration->streams.size(), 1u);
  EXPECT_EQ(run.measured_iteration->streams[0].name, "compute (stream 27)");

  const std::string html = execution_report_html(run, summarize_execution(run));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* part : {"76.213 ms", "66.195 ms", "-13.1%", "37.8%", "11.183 → 4.462", "NVIDIA H200",
                           "measured against predicted time of every op, log-log",
                           "simulated and measured timelines of one iteration on one time axis",
                           "simulated: stage 0", "measured: rank 0, iteration 9 (the median span of 9",
                           "measured compute (stream 27)", "L3.core_attention.bwd", "optimizer_step",
                           "no collective or point-to-point op"})
    EXPECT_NE(html.find(part), std::string::npos) << part;
  EXPECT_EQ(count(html, "<svg"), 2u);
  EXPECT_EQ(html.find("http"), std::string::npos);  // no external reference at all
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // The simulated lane comes above the measured one.
  EXPECT_LT(html.find("simulated compute"), html.find("measured compute (stream 27)"));
}

TEST(ExecutionReport, SameRunGivesSameBytes) {
  test::TempDir dir("execution-report-bytes");
  const std::filesystem::path a = testing::copy_fixture("7b4l-mbs1-h200", dir.path / "a");
  const std::filesystem::path b = testing::copy_fixture("7b4l-mbs1-h200", dir.path / "b");
  write_execution_report(a / "execution_report.html", load_executed_run(a));
  write_execution_report(b / "execution_report.html", load_executed_run(b));
  const std::string first = test::read_file(a / "execution_report.html");
  EXPECT_GT(first.size(), 10000u);
  EXPECT_EQ(first, test::read_file(b / "execution_report.html"));
}

TEST(ExecutionReport, RunWithoutTraceShowsTheSimulatedTimelineAlone) {
  const ExecutedRun run = load_executed_run(testing::executed_fixture("small-single-h200"));
  const std::string html = execution_report_html(run, summarize_execution(run));
  EXPECT_NE(html.find("simulated timeline of one iteration"), std::string::npos);
  EXPECT_NE(html.find("holds no measured trace (traces/measured_rank0.json)"), std::string::npos);
  EXPECT_EQ(html.find("measured: rank"), std::string::npos);
}

TEST(ExecutionCharts, TimelineStaysBoundedForManyKernels) {
  const IterationGraph graph = testing::two_stage_graph();
  const PlanPrediction prediction =
      read_plan_prediction(best_plan_json(testing::small_scenario(), testing::best_candidate(), graph), graph);
  MeasuredIteration measured;
  measured.rank_class = 0;
  measured.streams = {{7, "compute (stream 7)"}};
  for (TimeNs i = 0; i < 200000; ++i)  // 200k kernels of 30 ns every 35 ns
    measured.kernels.push_back({static_cast<OpIndex>(i % 2 == 0 ? 0 : 3), 7, i * 35, i * 35 + 30});
  measured.span_ns = 200000 * 35;
  DualTimelineOptions options;
  options.plot_width_px = 400;
  const std::string svg = dual_timeline_svg(graph, prediction, 0, &measured, options);
  // At most one rect per pixel column and lane (the simulated lanes included), plus the ticks' lines.
  EXPECT_LE(count(svg, "<rect"), 400u * 5);
  EXPECT_GE(count(svg, "<rect"), 1u);
  EXPECT_THROW(dual_timeline_svg(graph, prediction, 1, &measured, options), std::invalid_argument);
}

TEST(ExecutionCharts, ScatterMergesAndCapsMarks) {
  const IterationGraph graph = testing::two_stage_graph();
  std::vector<OpPoint> points;
  for (int i = 0; i < 1000; ++i) points.push_back({0, 0, 0, OpKind::gemm, 1000, 1000});  // one cell
  points.push_back({0, 0, 3, OpKind::gemm, 1000, 100000});
  points.push_back({4, 1, 1, OpKind::attention_forward, 5000, 2000});
  const std::string svg = op_scatter_svg(graph, points);
  // The diagonal and 3 marks: the 1000 equal points are one, whose tooltip counts them.
  EXPECT_NE(svg.find("1000 gemm ops here, e.g. L0.fc1.fwd.mb0 (rank 0)"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>"), 3u);
  const std::string capped = op_scatter_svg(graph, points, 1);
  EXPECT_EQ(count(capped, "<title>"), 1u);
  EXPECT_NE(capped.find("L0.fc1.bwd.mb0 (rank 0): predicted 0.001 ms, measured 0.100 ms (+9900.0%)"), std::string::npos)
      << "the mark farthest from the diagonal is kept";
  EXPECT_NE(capped.find("2 marks nearest the diagonal left out"), std::string::npos);
}

}  // namespace
}  // namespace twin
