// SVG pieces of the report: op families, axis ticks, pixel binning of the timeline (closed forms on
// hand-made lanes), the element bound for 100k ops, and the memory and time charts.
#include <gtest/gtest.h>

#include "reports/charts_svg.hpp"
#include "reports/format.hpp"
#include "reports/svg.hpp"
#include "reports/timeline_svg.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

using testing::count;

Op comm(OpKind kind, GroupKind group) {
  Op op;
  op.kind = kind;
  op.group = group;
  return op;
}

TEST(OpFamily, CommunicationGoesByCommunicatorComputeByKind) {
  EXPECT_EQ(op_family(testing::make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 0, 0)), OpFamily::gemm);
  EXPECT_EQ(op_family(testing::make_op(OpKind::moe_router, OpRole::router, Stream::compute, 0, 0)), OpFamily::gemm);
  EXPECT_EQ(op_family(testing::make_op(OpKind::attention_backward, OpRole::core_attention, Stream::compute, 0, 0)),
            OpFamily::attention);
  EXPECT_EQ(op_family(testing::make_op(OpKind::norm_forward, OpRole::input_norm, Stream::compute, 0, 0)),
            OpFamily::memory_bound);
  EXPECT_EQ(op_family(testing::make_op(OpKind::optimizer_step, OpRole::optimizer, Stream::compute, -1, -1)),
            OpFamily::optimizer);
  EXPECT_EQ(op_family(comm(OpKind::all_reduce, GroupKind::tensor)), OpFamily::tp_comm);
  EXPECT_EQ(op_family(comm(OpKind::all_gather, GroupKind::data)), OpFamily::dp_comm);
  EXPECT_EQ(op_family(comm(OpKind::reduce_scatter, GroupKind::expert_data)), OpFamily::dp_comm);
  EXPECT_EQ(op_family(comm(OpKind::all_to_all, GroupKind::expert)), OpFamily::ep_comm);
  EXPECT_EQ(op_family(comm(OpKind::send, GroupKind::context)), OpFamily::cp_comm);
  EXPECT_EQ(op_family(comm(OpKind::recv, GroupKind::pipeline)), OpFamily::pp_p2p);
}

TEST(Svg, TicksAreRoundSteps) {
  EXPECT_EQ(nice_ticks(7.3, 10), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(nice_ticks(95, 6), (std::vector<double>{0, 20, 40, 60, 80}));
  EXPECT_EQ(nice_ticks(0, 6), (std::vector<double>{0}));
  EXPECT_EQ(tick_decimals(5), 0);
  EXPECT_EQ(tick_decimals(0.2), 1);
  EXPECT_EQ(tick_decimals(0.05), 2);
}

TEST(Svg, EscapesTextAndTooltips) {
  Svg svg(10, 10, "a<b");
  svg.rect(0, 0, 1, 1, "#fff", "x & y");
  svg.text(0, 0, "<t>");
  const std::string text = svg.str();
  EXPECT_NE(text.find("aria-label=\"a&lt;b\""), std::string::npos);
  EXPECT_NE(text.find("<title>x &amp; y</title>"), std::string::npos);
  EXPECT_NE(text.find(">&lt;t&gt;</text>"), std::string::npos);
  EXPECT_EQ(svg.elements(), 2u);
}

// One class, one compute lane; the iteration lasts `end_ns` so that 1000 px columns have known widths.
struct OneLane {
  IterationGraph graph;
  IterationResult result;
  OneLane() {
    graph.classes.resize(1);
    graph.classes[0].label = "stage 0";
    result.classes.resize(1);
  }
  void add(OpKind kind, TimeNs start_ns, TimeNs end_ns) {
    graph.classes[0].add(testing::make_op(kind, OpRole::none, Stream::compute, 0, 0));
    result.classes[0].op_timings.push_back({start_ns, end_ns});
    result.iteration_ns = std::max(result.iteration_ns, end_ns);
  }
};

TEST(Timeline, WideOpsKeepTheirOwnRectAtExactPixels) {
  OneLane lane;
  lane.add(OpKind::gemm, 0, 500);
  lane.add(OpKind::elementwise, 500, 1000);  // 1 ns per pixel column
  const std::string svg = timeline_svg(lane.graph, lane.result);
  const std::string gemm = "<rect x=\"200.0\" y=\"8.0\" width=\"500.0\" height=\"12.0\" fill=\"" +
                           family_color(OpFamily::gemm) + "\"><title>";
  const std::string memory_bound = "<rect x=\"700.0\" y=\"8.0\" width=\"500.0\" height=\"12.0\" fill=\"" +
                                   family_color(OpFamily::memory_bound) + "\"><title>";
  EXPECT_NE(svg.find(gemm), std::string::npos) << svg;
  EXPECT_NE(svg.find(memory_bound), std::string::npos) << svg;
  EXPECT_NE(svg.find("stage 0 · compute"), std::string::npos);
}

TEST(Timeline, SubPixelOpsMergeIntoOneRect) {
  OneLane lane;
  // 64 ns per column (exact in binary); 1000 ops of 16 ns fill columns 0..249, half GEMM and half norm
  // in every column: ties go to the first family, GEMM.
  for (int i = 0; i < 1000; ++i) lane.add(i % 2 ? OpKind::norm_forward : OpKind::gemm, 16 * i, 16 * i + 16);
  lane.add(OpKind::elementwise, 63990, 64000);  // 16% of the last column: a thin bar, visible but sparse
  const std::string svg = timeline_svg(lane.graph, lane.result);
  EXPECT_NE(svg.find("<rect x=\"200.0\" y=\"8.0\" width=\"250.0\" height=\"12.0\" fill=\"" +
                     family_color(OpFamily::gemm) + "\"><title>1000 ops, 0.016 ms busy"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<rect x=\"1199.0\" y=\"12.0\" width=\"1.0\" height=\"4.0\" fill=\"" +
                     family_color(OpFamily::memory_bound) + "\"><title>"),
            std::string::npos)
      << svg;
}

TEST(Timeline, HundredThousandOpsStayWithinAFewMegabytes) {
  IterationGraph graph;
  IterationResult result;
  constexpr int kClasses = 8, kOpsPerClass = 12500;
  graph.classes.resize(kClasses);
  result.classes.resize(kClasses);
  for (int c = 0; c < kClasses; ++c) {
    graph.classes[c].index = c;
    graph.classes[c].label = "stage " + std::to_string(c);
    TimeNs compute_ns = 0, comm_ns = 0;
    for (int i = 0; i < kOpsPerClass; ++i) {
      const bool is_comm = i % 3 == 2;
      Op op = is_comm ? comm(OpKind::all_reduce, GroupKind::tensor)
                      : testing::make_op(i % 3 ? OpKind::elementwise : OpKind::gemm, OpRole::none, Stream::compute, 0, 0);
      if (is_comm) op.stream = Stream::tp_comm;
      const TimeNs duration_ns = 1000 + (i * 7919) % 50000;
      TimeNs& clock = is_comm ? comm_ns : compute_ns;
      graph.classes[c].add(op);
      result.classes[c].op_timings.push_back({clock, clock + duration_ns});
      clock += duration_ns + (i % 11) * 300;
      result.iteration_ns = std::max(result.iteration_ns, clock);
    }
  }
  ASSERT_EQ(graph.total_ops(), 100000u);
  const std::string svg = timeline_svg(graph, result);
  EXPECT_LT(svg.size(), 3u * 1024 * 1024);
  // At most one rect per pixel column of each of the 16 lanes, plus 8 class bands.
  EXPECT_LE(count(svg, "<rect"), 16u * 1000 + 8);
  EXPECT_GT(count(svg, "<rect"), 16u);
}

TEST(Timeline, LeavesOutLanesBeyondTheCapWithANote) {
  IterationGraph graph;
  IterationResult result;
  graph.classes.resize(5);
  result.classes.resize(5);
  for (int c = 0; c < 5; ++c) {
    graph.classes[c].index = c;
    graph.classes[c].add(testing::make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 0, 0));
    result.classes[c].op_timings = {{0, 100}};
  }
  result.iteration_ns = 100;
  const std::string svg = timeline_svg(graph, result, {1000, 3});
  EXPECT_EQ(count(svg, "· compute</text>"), 3u);
  EXPECT_NE(svg.find("2 more lanes not shown"), std::string::npos);
}

TEST(MemoryChart, StacksEveryPartAndDrawsCapacityPerStage) {
  const Candidate best = testing::best_candidate();
  const std::string svg = memory_chart_svg(best.memory, {79.6, 79.6});
  EXPECT_EQ(count(svg, "stroke-dasharray"), 2u);
  EXPECT_NE(svg.find("<title>stage 0 activations: 20.00 GiB</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>stage 1 optimizer states: 12.00 GiB</title>"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect"), 12u);  // 6 parts x 2 stages
  EXPECT_EQ(count(memory_chart_svg(best.memory, {}), "stroke-dasharray"), 0u);
}

TEST(TimeBreakdownChart, OneBarPerCandidateOnACommonScale) {
  const auto ranked = testing::ranked_candidates();
  const std::string svg = time_breakdown_svg({&ranked[0], &ranked[1]});
  EXPECT_EQ(count(svg, "<rect"), 8u);
  EXPECT_NE(svg.find("<title>compute: 0.002 ms</title>"), std::string::npos);
  EXPECT_NE(svg.find("1. " + ranked[0].strategy.key()), std::string::npos);
  EXPECT_NE(svg.find("2. " + ranked[1].strategy.key()), std::string::npos);
}

// A family plan whose key is longer than any chart's label.
struct LongKeyPlan final : FamilyPlan {
  std::string family() const override { return "heterogeneous"; }
  std::string key() const override { return "hetero." + std::string(300, 'p'); }
  std::string summary() const override { return {}; }
  nlohmann::json to_json() const override { return {}; }
  Candidate evaluate(const Scenario&, const Profile&, bool, IterationGraph*) const override { return {}; }
};

// Labels are never cut: the report's script measures them in the browser and fits each chart (data-fit) around
// them; tests/reports/report_browser_test.cpp checks that nothing is clipped.
TEST(Charts, LongPlanKeysAndLaneLabelsStayWhole) {
  Candidate long_key = testing::best_candidate();
  long_key.plan = std::make_shared<LongKeyPlan>();
  const std::string svg = time_breakdown_svg({&long_key});
  EXPECT_NE(svg.find("1. hetero." + std::string(300, 'p') + "</text>"), std::string::npos);
  EXPECT_NE(svg.find("data-fit"), std::string::npos);
  OneLane lane;
  lane.graph.classes[0].label = "pipeline 3 stage 1 (A100-SXM-40GB, 2 of 4 identical)";
  lane.add(OpKind::gemm, 0, 1000);
  const std::string timeline = timeline_svg(lane.graph, lane.result);
  EXPECT_NE(timeline.find(">pipeline 3 stage 1 (A100-SXM-40GB, 2 of 4 identical) · compute<"), std::string::npos);
  EXPECT_NE(timeline.find("data-fit"), std::string::npos);
}

TEST(Timeline, ASharedAxisEndsWhereTheSlowestPlanEnds) {
  OneLane lane;
  lane.add(OpKind::gemm, 0, 1000);
  TimelineOptions options;
  options.axis_end_ns = 2000;  // this plan takes half of the shared axis: its op covers 500 of 1000 px
  const std::string svg = timeline_svg(lane.graph, lane.result, options);
  EXPECT_NE(svg.find("width=\"500.0\""), std::string::npos) << svg;
}

}  // namespace
}  // namespace twin
