// The cost figures of a candidate from hand-set throughput, and where they appear: ranking.csv's appended columns
// (the columns before them unchanged) and the report's ranking table.
#include "reports/training_cost.hpp"

#include <gtest/gtest.h>

#include "reports/html_report.hpp"
#include "reports/ranking_csv.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

CostConfig two_dollars_for(double tokens) {
  CostConfig cost;
  cost.price_per_gpu_hour = 2.0;
  cost.tokens_to_train = tokens;
  return cost;
}

TEST(TrainingCost, FiguresFollowFromThroughputAndPrice) {
  const Scenario scenario = testing::small_scenario();  // 8 GPUs
  Candidate c = testing::best_candidate();
  c.throughput.tokens_per_s = 100000;
  c.throughput.iteration_s = 0.36;
  const std::optional<TrainingCost> t = training_cost(two_dollars_for(3.6e9), scenario.cluster, c);
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->gpu_hours_per_step, 8 * 0.36 / 3600);
  EXPECT_DOUBLE_EQ(t->gpu_hours_per_million_tokens, 8 * 10.0 / 3600);  // 10 s per million tokens
  EXPECT_DOUBLE_EQ(t->cost_per_million_tokens, 16 * 10.0 / 3600);
  EXPECT_DOUBLE_EQ(*t->time_to_train_hours, 10.0);                      // 3.6e9 tokens at 1e5 per s
  EXPECT_DOUBLE_EQ(*t->cost_to_train, 160.0);
  EXPECT_FALSE(training_cost(two_dollars_for(1), scenario.cluster, testing::ranked_candidates()[2]));  // not simulated
}

TEST(TrainingCost, RankingCsvAppendsItsColumnsAfterTheOthers) {
  const Scenario scenario = testing::small_scenario();
  const std::vector<Candidate> ranked = testing::ranked_candidates();
  const CostConfig cost = two_dollars_for(1e12);
  const std::vector<std::string> columns = ranking_columns(&cost);
  ASSERT_EQ(columns.size(), ranking_csv_columns().size() + 5);
  EXPECT_TRUE(std::equal(ranking_csv_columns().begin(), ranking_csv_columns().end(), columns.begin()));
  EXPECT_EQ(columns.back(), "cost_to_train_USD");
  EXPECT_EQ(columns[ranking_csv_columns().size() + 2], "cost_per_million_tokens_USD");
  const std::vector<std::vector<std::string>> plain = ranking_rows(scenario, ranked);
  const std::vector<std::vector<std::string>> priced = ranking_rows(scenario, ranked, &cost);
  ASSERT_EQ(plain.size(), priced.size());
  for (std::size_t r = 0; r < plain.size(); ++r) {
    ASSERT_EQ(priced[r].size(), plain[r].size() + 5);
    EXPECT_TRUE(std::equal(plain[r].begin(), plain[r].end(), priced[r].begin())) << "row " << r;
  }
  EXPECT_FALSE(priced[0].back().empty());  // the best, simulated
  EXPECT_TRUE(priced[2].back().empty());   // out of memory
  std::vector<std::vector<std::string>> with_header = {ranking_csv_columns()};
  with_header.insert(with_header.end(), plain.begin(), plain.end());
  EXPECT_EQ(ranking_csv(scenario, ranked), csv_text(with_header));
}

TEST(TrainingCost, ReportRankingShowsTheCostColumns) {
  const Scenario scenario = testing::small_scenario();
  const std::vector<Candidate> ranked = testing::ranked_candidates();
  const CostConfig cost = two_dollars_for(1e12);
  const std::string with = html_report(scenario, ranked, testing::two_stage_graph(), ranked[0], {}, &cost);
  const std::string without = html_report(scenario, ranked, testing::two_stage_graph(), ranked[0]);
  EXPECT_NE(with.find("\"cost_per_million_tokens_USD\""), std::string::npos);  // a column of the embedded ranking
  EXPECT_NE(with.find("\"time_to_train_hours\""), std::string::npos);
  EXPECT_EQ(without.find("cost_per_million_tokens"), std::string::npos);
}

}  // namespace
}  // namespace twin
