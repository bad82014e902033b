// report.html from hand-built candidates: the ranking table has one row per candidate, the charts are
// inline SVG, nothing points outside the file, user text is escaped, and the "why" numbers are exact.
#include "reports/html_report.hpp"

#include <gtest/gtest.h>

#include "reports/ranking_table.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

std::string report(const Scenario& scenario) {
  const auto ranked = testing::ranked_candidates();
  return html_report(scenario, ranked, testing::two_stage_graph(), ranked[0]);
}

TEST(HtmlReport, RankingTableHasOneRowPerCandidate) {
  const std::string html = report(testing::small_scenario());
  EXPECT_EQ(count(html, "<table id=\"ranking\">"), 1u);
  EXPECT_EQ(count(html, "<tr class=\"feasible\">"), 2u);
  EXPECT_EQ(count(html, "<tr class=\"infeasible\">"), 2u);
  // Feasible rows come first.
  EXPECT_LT(html.rfind("<tr class=\"feasible\">"), html.find("<tr class=\"infeasible\">"));
  EXPECT_NE(html.find("out of memory: 137.5 GiB &gt; 79.6 GiB on stage 0"), std::string::npos);
  EXPECT_EQ(count(html, "Showing"), 0u);
}

TEST(HtmlReport, IsSelfContained) {
  const std::string html = report(testing::small_scenario());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_GE(count(html, "<svg "), 3u);  // timeline, memory, time breakdown
  EXPECT_EQ(count(html, "<svg "), count(html, "</svg>"));
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(HtmlReport, EscapesUserText) {
  Scenario scenario = testing::small_scenario();
  scenario.name = "<script>alert(1)</script> & \"co\"";
  const std::string html = report(scenario);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;"), std::string::npos);
  EXPECT_NE(html.find("&lt;not&gt; valid"), std::string::npos);  // the invalid candidate's reason
}

TEST(HtmlReport, WarnsThatBuiltinTimesAreNotThisClustersMeasurements) {
  Scenario scenario = testing::small_scenario();
  const std::string warning = "<b>Not this cluster's measurements.</b>";
  EXPECT_NE(report(scenario).find(warning), std::string::npos);
  EXPECT_EQ(report(scenario).find("<b>Scaled profile.</b>"), std::string::npos);
  scenario.profile_scaling = true;
  EXPECT_NE(report(scenario).find("<b>Scaled profile.</b>"), std::string::npos);
  scenario.profile = "profiles/h100-measured.json";
  const std::string html = report(scenario);
  EXPECT_EQ(html.find(warning), std::string::npos);
  EXPECT_NE(html.find("profiles/h100-measured.json"), std::string::npos);
}

TEST(HtmlReport, HeaderStatesFormulaAndPeak) {
  const std::string html = report(testing::small_scenario());
  EXPECT_NE(html.find("Megatron-LM num_floating_point_operations"), std::string::npos);
  EXPECT_NE(html.find("7912 TFLOP/s"), std::string::npos);  // 8 GPUs x 989
  EXPECT_NE(html.find("H100-SXM-80GB"), std::string::npos);
}

TEST(HtmlReport, WhyParagraphComesFromTheNumbers) {
  const auto ranked = testing::ranked_candidates();
  const std::string why = why_this_one_html(ranked, ranked[0], {79.6, 79.6});
  // 7000 ns: compute 2001 (28.6%), exposed 500 (7.1%), bubble 3500 (50.0%), optimizer 999 (14.3%).
  EXPECT_NE(why.find("fastest of 2 feasible candidates (4 enumerated)"), std::string::npos) << why;
  EXPECT_NE(why.find("compute 28.6%, exposed communication 7.1%, pipeline bubble 50.0%, optimizer 14.3%"),
            std::string::npos) << why;
  EXPECT_NE(why.find("largest overhead is the pipeline bubble (50.0% of the iteration)"), std::string::npos) << why;
  // Runner-up 9600 ns is 37.1% longer; exposed communication differs most (2500 - 500 = +2000 ns).
  EXPECT_NE(why.find("takes 0.010 ms (37.1% longer); the largest difference is in exposed communication (+0.002 ms)"),
            std::string::npos) << why;
  EXPECT_NE(why.find("Peak memory is 37.5 GiB per GPU on stage 0 of 79.6 GiB (42.1 GiB headroom)"),
            std::string::npos) << why;
  EXPECT_NE(why.find("2 candidates were excluded: 1 out of memory, 1 invalid"), std::string::npos) << why;
}

TEST(HtmlReport, SameInputGivesSameBytes) {
  EXPECT_EQ(report(testing::small_scenario()), report(testing::small_scenario()));
}

TEST(RankingTable, CapsRowsAndSaysWhereTheRestIs) {
  std::vector<Candidate> many;
  for (int i = 0; i < 400; ++i) many.push_back(testing::best_candidate());
  for (int i = 0; i < 80; ++i) many.push_back(testing::ranked_candidates()[3]);
  const std::string table = ranking_table_html(many);
  EXPECT_EQ(count(table, "<tr class=\"feasible"), kRankingTableMaxRows - kRankingTableInfeasibleRows);  // all tie
  EXPECT_EQ(count(table, "<tr class=\"infeasible\">"), kRankingTableInfeasibleRows);
  EXPECT_NE(table.find("Showing 250 of 400 feasible and 50 of 80 infeasible candidates"), std::string::npos);
  // Few infeasible ones leave their unused rows to feasible candidates.
  many.resize(410);
  const std::string fewer = ranking_table_html(many);
  EXPECT_EQ(count(fewer, "<tr class=\"feasible"), 290u);
  EXPECT_EQ(count(fewer, "<tr class=\"infeasible\">"), 10u);
  // Candidates a pruned search did not simulate are counted apart from the infeasible ones.
  for (int i = 0; i < 30; ++i) {
    Candidate skipped = testing::ranked_candidates()[3];
    skipped.pruned = true;
    skipped.infeasible_reason = "not simulated: its compute alone takes at least 1.0 s";
    many.push_back(skipped);
  }
  const std::string with_pruned = ranking_table_html(many);
  EXPECT_NE(with_pruned.find("infeasible or not simulated (30 feasible ones whose compute alone cannot reach the top)"),
            std::string::npos) << with_pruned.substr(with_pruned.find("Showing"));
}

TEST(HtmlReport, CandidatesWithinTheModelsErrorAreMarkedAsTies) {
  auto ranked = testing::ranked_candidates();  // the best takes 7000 ns
  ranked[1].result.iteration_ns = 7200;        // +2.9%: within the 3.9% the model errs by
  const std::string table = ranking_table_html(ranked);
  EXPECT_EQ(count(table, "<tr class=\"feasible tie\">"), 1u);
  EXPECT_NE(table.find("+2.9% (tie)"), std::string::npos) << table;
  EXPECT_NE(table.find("1 candidate is within 3.9% of the best"), std::string::npos);
  const std::string why = why_this_one_html(ranked, ranked[0], {79.6, 79.6});
  EXPECT_NE(why.find("The two tie: 2.9% is within the model&#39;s mean error"), std::string::npos) << why;
  ranked[1].result.iteration_ns = 9600;  // +37%: told apart
  EXPECT_EQ(count(ranking_table_html(ranked), "tie"), 0u);
  EXPECT_EQ(why_this_one_html(ranked, ranked[0], {79.6, 79.6}).find("tie"), std::string::npos);
}

TEST(HtmlReport, TheKeyColumnsComeBeforeTheStrategyFields) {
  const std::string table = ranking_table_html(testing::ranked_candidates());
  const auto at = [&](const char* header) { return table.find(header); };
  EXPECT_LT(at("<th>iteration (ms)</th>"), at(">TP</th>"));
  EXPECT_LT(at("<th>MFU</th>"), at(">TP</th>"));
  EXPECT_LT(at("<th>peak memory (GiB)</th>"), at(">TP</th>"));
}

TEST(HtmlReport, MemoryCapacityFollowsEachPipelinesOwnGpus) {
  Scenario scenario = testing::small_scenario();
  NodeGroup a100 = scenario.cluster.node_groups[0];
  a100.gpu.name = "A100-SXM-40GB";
  a100.gpu.memory_GiB = 40;
  scenario.cluster.node_groups.push_back(a100);
  // Two asymmetric pipelines, each an H100 stage feeding an A100 stage: one memory entry per class.
  IterationGraph graph;
  graph.classes.resize(4);
  for (int c = 0; c < 4; ++c) {
    graph.classes[c].index = c;
    graph.classes[c].pipeline = c / 2;
    graph.classes[c].stage = c % 2;
    graph.classes[c].node_group = c % 2;
  }
  EXPECT_EQ(stage_capacities_GiB(scenario, graph, 4), (std::vector<double>{79.6, 40, 79.6, 40}));
  // A uniform plan: one entry per stage, the smallest GPU of the stage.
  graph.classes.resize(2);
  graph.classes[1].pipeline = 0;
  graph.classes[1].node_group = 1;
  EXPECT_EQ(stage_capacities_GiB(scenario, graph, 2), (std::vector<double>{79.6, 40}));
}

}  // namespace
}  // namespace twin
