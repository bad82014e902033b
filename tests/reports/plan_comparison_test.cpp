// The side-by-side of the top plans: bytes per communicator from the graph's ops (receives not counted twice, the
// busiest class), the MoE all-to-all by role, the routing priced, and the timelines on one axis.
#include "reports/plan_comparison.hpp"

#include <tuple>

#include <gtest/gtest.h>

#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

constexpr Bytes kMiB = 1024 * 1024;

// The two-stage graph plus, on stage 1, an MoE dispatch all-to-all of 10 MiB and a Ulysses-style all-to-all of
// 5 MiB (context group, no MoE role), each 100 ns after the stage's last op.
struct MoeGraph {
  IterationGraph graph = testing::two_stage_graph();
  Candidate candidate = testing::best_candidate();
  MoeGraph() {
    for (auto [role, group, bytes] : {std::tuple{OpRole::dispatch, GroupKind::expert, 10 * kMiB},
                                      std::tuple{OpRole::none, GroupKind::context, 5 * kMiB}}) {
      Op op = testing::make_op(OpKind::all_to_all, role, Stream::ep_comm, 1, 0);
      op.group = group, op.bytes = bytes;
      graph.classes[1].add(op);
      candidate.result.classes[1].op_timings.push_back({5800, 5900});
    }
  }
};

TEST(ComparePlan, CountsEachCommunicatorsBytesOnTheBusiestClass) {
  MoeGraph moe;
  const ComparedPlan plan = compare_plan(1, moe.candidate, moe.graph, 14000);
  const auto bytes = [&](GroupKind group) { return plan.communication_bytes[static_cast<int>(group)]; };
  EXPECT_EQ(bytes(GroupKind::tensor), 32 * kMiB);
  EXPECT_EQ(bytes(GroupKind::data), 64 * kMiB);
  EXPECT_EQ(bytes(GroupKind::pipeline), 8 * kMiB);  // each stage sends 8 MiB; its receive is the other's send
  EXPECT_EQ(bytes(GroupKind::expert), 10 * kMiB);
  EXPECT_EQ(bytes(GroupKind::context), 5 * kMiB);
  EXPECT_EQ(plan.moe_all_to_all_bytes, 10 * kMiB);  // the dispatch only: the context all-to-all is no expert's
  EXPECT_TRUE(plan.candidate.result.classes[0].op_timings.empty());
  // Its critical class alone, on an axis twice its iteration: its first op (1000 of 14000 ns) covers 72 px columns.
  EXPECT_NE(plan.timeline_svg.find("stage 0 · compute"), std::string::npos);
  EXPECT_EQ(plan.timeline_svg.find("stage 1"), std::string::npos);
  EXPECT_EQ(plan.timeline_svg.find("<title>"), std::string::npos);  // no op tooltips: the best's timeline has them
  EXPECT_NE(plan.timeline_svg.find("x=\"200.0\" y=\"8.0\" width=\"72.0\""), std::string::npos) << plan.timeline_svg;
}

TEST(PlanComparison, SetsThePlansSideBySideWithTheirMoeFacts) {
  MoeGraph moe;
  Scenario scenario = testing::small_scenario();
  std::vector<ComparedPlan> plans = {compare_plan(1, moe.candidate, moe.graph, 7000)};
  EXPECT_EQ(plan_comparison_section_html(scenario, plans).find("MoE"), std::string::npos);  // a dense model
  scenario.model.moe = {8, 2, 14336, 1, 1.25};
  plans.push_back(plans.front());
  plans.back().place = 2;
  plans.back().candidate.strategy.expert_model_parallel_size = 2;
  plans.back().candidate.result.iteration_ns = 7700;
  const std::string html = plan_comparison_section_html(scenario, plans);
  EXPECT_NE(html.find("<th>place 1</th><th>place 2</th>"), std::string::npos) << html;
  EXPECT_NE(html.find("0.008 (+10.0%)"), std::string::npos) << html;
  EXPECT_NE(html.find("communication per GPU: expert (EP)</th><td class=\"num\">0.01 GB"), std::string::npos);
  EXPECT_EQ(html.find("communication per GPU: embedding"), std::string::npos);  // no plan moves any
  // Priced routing: the busiest expert 1.25 x the mean; at EP 2 its rank holds it and 3 experts at (8 - 1.25) / 7
  // of the mean each: (1.25 + 3 x 0.964) / 4 = 1.036.
  EXPECT_NE(html.find("<td class=\"num\">1.250</td>"), std::string::npos);
  EXPECT_NE(html.find("1.036 at EP 2"), std::string::npos) << html;
  EXPECT_NE(html.find("MoE: dispatch and combine all-to-all per GPU</th><td class=\"num\">0.01 GB"), std::string::npos);
  EXPECT_NE(html.find("twin simulate --top 3"), std::string::npos);  // fewer than three compared
  EXPECT_EQ(plan_comparison_section_html(scenario, {}), "");
}

}  // namespace
}  // namespace twin
