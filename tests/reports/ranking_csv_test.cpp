// ranking.csv: exact header, one row per candidate, places for feasible rows only, exact fixed-decimal
// numbers from hand-set values, RFC-4180 quoting that a parser reads back into the same fields.
#include "reports/ranking_csv.hpp"

#include <gtest/gtest.h>

#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

// A strict RFC-4180 reader: CRLF records, quoted fields with doubled quotes.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> records(1, std::vector<std::string>(1));
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        records.back().back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        records.back().back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      records.back().emplace_back();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      records.emplace_back(1);
      ++i;
    } else {
      records.back().back() += c;
    }
  }
  if (records.back().size() == 1 && records.back()[0].empty()) records.pop_back();
  return records;
}

TEST(RankingCsv, HeaderUsesMegatronNamesAndUnits) {
  const std::string csv = ranking_csv(testing::small_scenario(), {});
  EXPECT_EQ(csv,
            "place,strategy,family,tensor_model_parallel_size,pipeline_model_parallel_size,context_parallel_size,"
            "expert_model_parallel_size,data_parallel_size,virtual_pipeline_model_parallel_size,sequence_parallel,"
            "micro_batch_size,num_micro_batches,zero_stage,recompute,schedule,feasible,iteration_time_s,tokens_per_s,"
            "mfu,hfu,peak_memory_GiB,compute_s,exposed_communication_s,pipeline_bubble_s,optimizer_s,"
            "infeasible_reason,plan,replay,executable\r\n");
}

TEST(RankingCsv, OneRowPerCandidateWithExactNumbers) {
  const auto candidates = testing::ranked_candidates();
  const auto records = parse_csv(ranking_csv(testing::small_scenario(), candidates));
  ASSERT_EQ(records.size(), candidates.size() + 1);
  for (const auto& record : records) EXPECT_EQ(record.size(), ranking_csv_columns().size());

  const std::vector<std::string> best = {
      "1", candidates[0].strategy.key(), "uniform", "2", "2", "1", "1", "2", "1", "true", "1", "8", "0", "none", "1f1b", "true",
      "0.000007000", "1234567.9", "0.4312", "0.5126",
      "37.500",  // 2 + 2 + 12 + 20 + 0.5 + 1 GiB
      "0.000002001", "0.000000500", "0.000003500", "0.000000999", "", "", "whole", ""};
  EXPECT_EQ(records[1], best);
  EXPECT_EQ(records[2][0], "2");
  EXPECT_EQ(records[2][14], "gpipe");
  EXPECT_EQ(records[2][16], "0.000009600");
}

TEST(RankingCsv, AnExtrapolatedRowSaysFromWhichReplays) {
  auto candidates = testing::ranked_candidates();
  candidates[1].result.steady_state = {4, 8};
  const auto records = parse_csv(ranking_csv(testing::small_scenario(), candidates));
  const std::size_t replay = ranking_csv_columns().size() - 2;
  ASSERT_EQ(records[0][replay], "replay");
  EXPECT_EQ(records[1][replay], "whole");
  EXPECT_EQ(records[2][replay], "steady state of 4 and 8 micro-batches");
  EXPECT_EQ(records[3][replay], "");  // not simulated
}

// The last column is twin execute's verdict, as twin simulate set it (pipeline/executable_plans.hpp); empty unless asked.
TEST(RankingCsv, TheLastColumnSaysWhetherTwinExecuteRunsThePlan) {
  auto candidates = testing::ranked_candidates();
  candidates[0].executable = "yes";
  candidates[1].executable = "no: at /scenario/training/fp8: no fp8 section, twin execute runs no FP8 yet";
  const auto records = parse_csv(ranking_csv(testing::small_scenario(), candidates));
  EXPECT_EQ(records[0].back(), "executable");
  EXPECT_EQ(records[1].back(), "yes");
  EXPECT_EQ(records[2].back(), candidates[1].executable);
  EXPECT_EQ(records[3].back(), "");
}

TEST(RankingCsv, InfeasibleRowsHaveNoRankNoTimesAndTheirReason) {
  const auto candidates = testing::ranked_candidates();
  const auto records = parse_csv(ranking_csv(testing::small_scenario(), candidates));
  const auto& out_of_memory = records[3];
  EXPECT_EQ(out_of_memory[0], "");
  EXPECT_EQ(out_of_memory[15], "false");
  EXPECT_EQ(out_of_memory[16], "");
  EXPECT_EQ(out_of_memory[20], "137.500");  // its estimate shows how far over it is
  EXPECT_EQ(out_of_memory[25], "out of memory: 137.5 GiB > 79.6 GiB on stage 0");
  const auto& invalid = records[4];
  EXPECT_EQ(invalid[20], "");
  EXPECT_EQ(invalid[25], candidates[3].infeasible_reason);  // comma and quotes survive the round trip
}

TEST(RankingCsv, QuotesOnlyFieldsThatNeedIt) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\rhere"), "\"cr\rhere\"");
}

TEST(RankingCsv, SameCandidatesGiveSameBytes) {
  EXPECT_EQ(ranking_csv(testing::small_scenario(), testing::ranked_candidates()),
            ranking_csv(testing::small_scenario(), testing::ranked_candidates()));
}

}  // namespace
}  // namespace twin
