// report.html from hand-built candidates: the ranking's embedded data has one row per candidate with ranking.csv's
// columns, the charts are inline SVG, nothing points outside the file, user text is escaped, and the "why"
// numbers are exact. tests/reports/report_browser_test.cpp renders a real report in Chromium.
#include "reports/html_report.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/ranking_csv.hpp"
#include "reports/ranking_table.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

using testing::count;

std::string report(const Scenario& scenario) {
  const auto ranked = testing::ranked_candidates();
  return html_report(scenario, ranked, testing::two_stage_graph(), ranked[0]);
}

// The ranking's data as the page embeds it.
nlohmann::json ranking_data(const std::string& html) {
  const std::string open = "<script id=\"ranking-data\" type=\"application/json\">";
  const std::size_t begin = html.find(open) + open.size();
  return nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
}

// A row's field under the column `name`.
std::string field(const nlohmann::json& data, std::size_t row, const std::string& name) {
  for (const auto& column : data["columns"])
    if (column["name"] == name) return data["rows"][row][column["index"].get<std::size_t>()];
  return "(no column " + name + ")";
}

TEST(HtmlReport, RankingDataHasOneRowPerCandidateWithTheCsvsColumns) {
  const std::string html = report(testing::small_scenario());
  EXPECT_EQ(count(html, "<table id=\"ranking\">"), 1u);
  const nlohmann::json data = ranking_data(html);
  ASSERT_EQ(data["rows"].size(), 4u);
  // Every ranking.csv column, plus the report's "vs best"; a column added to the CSV appears without a report change.
  std::vector<std::string> names;
  for (const auto& column : data["columns"]) names.push_back(column["name"]);
  std::vector<std::string> expected = ranking_csv_columns();
  expected.push_back("vs_best");
  std::sort(names.begin(), names.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  const auto rows = ranking_rows(testing::small_scenario(), testing::ranked_candidates());
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t c = 0; c < rows[r].size(); ++c) EXPECT_EQ(data["rows"][r][c], rows[r][c]) << r << ", " << c;
  EXPECT_EQ(field(data, 0, "place"), "1");
  EXPECT_EQ(field(data, 1, "vs_best"), "0.371429");  // 9600 / 7000 - 1
  EXPECT_EQ(field(data, 0, "vs_best"), "0.000000");
  EXPECT_EQ(field(data, 2, "infeasible_reason"), "out of memory: 137.5 GiB > 79.6 GiB on stage 0");
  EXPECT_EQ(count(html, "The table holds"), 0u);  // every row embedded
}

TEST(HtmlReport, IsSelfContained) {
  const std::string html = report(testing::small_scenario());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_GE(count(html, "<svg "), 4u);  // trade-offs, timeline, memory, time breakdown
  EXPECT_EQ(count(html, "<svg "), count(html, "</svg>"));
  EXPECT_EQ(html.find("http"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("fetch("), std::string::npos);
  EXPECT_EQ(count(html, "<script"), 2u);  // the data and the one inlined script
  EXPECT_EQ(count(html, "</script>"), 2u);
}

TEST(HtmlReport, EscapesUserText) {
  Scenario scenario = testing::small_scenario();
  scenario.name = "<script>alert(1)</script> & \"co\"";
  std::vector<Candidate> ranked = testing::ranked_candidates();
  ranked[3].infeasible_reason = "</script><script>alert(2)</script>";
  const std::string html = html_report(scenario, ranked, testing::two_stage_graph(), ranked[0]);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("</script><script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;co&quot;"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script>\\u003cscript>alert(2)"), std::string::npos);  // inside the JSON data
  EXPECT_EQ(field(ranking_data(html), 3, "infeasible_reason"), ranked[3].infeasible_reason);
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
  EXPECT_NE(html.find("7912 TFLOP/s: the sum of every GPU&#39;s dense bf16 datasheet peak"), std::string::npos);  // 8 x 989
  EXPECT_NE(html.find("H100-SXM-80GB"), std::string::npos);
}

TEST(HtmlReport, AnFp8ScenarioStatesTheFp8PeakItsMfuIsMeasuredAgainst) {
  Scenario scenario = testing::small_scenario();
  scenario.training.fp8 = Fp8Config{};
  GpuSpec& gpu = scenario.cluster.node_groups[0].gpu;
  gpu.peak_fp8_tflops = 1979;  // the H100 SXM's datasheet FP8 peak
  const std::string expected = fmt::format("{:.0f} TFLOP/s: the sum of every GPU&#39;s dense FP8 datasheet peak",
                                           8 * gpu.peak_fp8_tflops);
  EXPECT_NE(report(scenario).find(expected), std::string::npos) << expected;
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
  // 300 rows, the 80 infeasible ones kept (up to kRankingTableInfeasibleRows are): positions in `many`, feasible first.
  const std::vector<std::size_t> rows = embedded_rows(many, 300);
  ASSERT_EQ(rows.size(), 300u);
  EXPECT_EQ(rows[219], 219u);
  EXPECT_EQ(rows[220], 400u);
  EXPECT_EQ(embedded_rows(many).size(), many.size());  // the default holds thousands
  // Few infeasible ones leave their unused rows to feasible candidates.
  many.resize(410);
  const std::vector<std::size_t> fewer = embedded_rows(many, 300);
  EXPECT_EQ(std::count_if(fewer.begin(), fewer.end(), [](std::size_t i) { return i < 400; }), 290);
  // Candidates a pruned search did not simulate are counted apart from the infeasible ones.
  for (int i = 0; i < 30; ++i) {
    Candidate skipped = testing::ranked_candidates()[3];
    skipped.pruned = true;
    skipped.infeasible_reason = "not simulated: its compute alone takes at least 1.0 s";
    many.push_back(skipped);
  }
  const std::string table = ranking_table_html(testing::small_scenario(), many, 300);
  EXPECT_NE(table.find("The table holds 300 of 440 candidates: 260 of the 400 feasible ones (the fastest) and 40 of "
                       "the 40 infeasible or not simulated (30 of them pruned by the search); ranking.csv lists them "
                       "all."),
            std::string::npos) << table.substr(table.find("The table holds"), 300);
  EXPECT_EQ(ranking_data(table)["rows"].size(), 300u);
}

TEST(HtmlReport, CandidatesWithinTheModelsErrorAreMarkedAsTies) {
  auto ranked = testing::ranked_candidates();  // the best takes 7000 ns
  ranked[1].result.iteration_ns = 7200;        // +2.9%: within the 3.9% the model errs by
  const std::string table = ranking_table_html(testing::small_scenario(), ranked);
  EXPECT_EQ(ranking_data(table)["tie_fraction"], kTieFraction);  // the script marks rows within it
  EXPECT_EQ(field(ranking_data(table), 1, "vs_best"), "0.028571");
  EXPECT_NE(table.find("1 candidate is within 3.9% of the best"), std::string::npos);
  const std::string why = why_this_one_html(ranked, ranked[0], {79.6, 79.6});
  EXPECT_NE(why.find("The two tie: 2.9% is within the model&#39;s mean error"), std::string::npos) << why;
  ranked[1].result.iteration_ns = 9600;  // +37%: told apart
  EXPECT_EQ(count(ranking_table_html(testing::small_scenario(), ranked), "tie\""), 0u);
  EXPECT_EQ(why_this_one_html(ranked, ranked[0], {79.6, 79.6}).find("tie"), std::string::npos);
}

TEST(HtmlReport, TheKeyColumnsComeBeforeTheStrategyFields) {
  const nlohmann::json data = ranking_data(ranking_table_html(testing::small_scenario(), testing::ranked_candidates()));
  std::vector<std::string> shown;
  for (const auto& column : data["columns"]) shown.push_back(column["name"]);
  const auto at = [&](const char* name) { return std::find(shown.begin(), shown.end(), name) - shown.begin(); };
  EXPECT_EQ(at("place"), 0);
  EXPECT_LT(at("iteration_time_s"), at("tensor_model_parallel_size"));
  EXPECT_LT(at("mfu"), at("tensor_model_parallel_size"));
  EXPECT_LT(at("peak_memory_GiB"), at("tensor_model_parallel_size"));
  // Known columns get a heading and a format; numbers sort as numbers.
  const auto& iteration = data["columns"][at("iteration_time_s")];
  EXPECT_EQ(iteration["label"], "iteration (ms)");
  EXPECT_EQ(iteration["format"], "ms");
  EXPECT_TRUE(iteration["numeric"].get<bool>());
  EXPECT_FALSE(data["columns"][at("strategy")]["numeric"].get<bool>());
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
