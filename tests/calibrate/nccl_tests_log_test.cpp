// nccl-tests logs into collective tables: a current all_reduce_perf log of 8 H100s, an older all_gather log of
// 2 hosts x 4 A100s whose file name says the collective, the tables folded into a profile that reads back and
// prices the logged sizes at the logged times, and bad logs refused at their line.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cost/collective_tables.hpp"
#include "calibrate/nccl_tests_import.hpp"
#include "calibrate/nccl_tests_log.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(TWIN_SOURCE_DIR) / "tests/calibrate/fixtures/nccl-tests";

std::string fixture(const std::string& name) { return read_input_file(kFixtures / name, "a fixture"); }

std::vector<NcclTestsRun> parse_fixture(const std::string& name, std::optional<OpKind> collective = std::nullopt) {
  return parse_nccl_tests_log(fixture(name), (kFixtures / name).string(), collective);
}

TEST(NcclTestsLog, CurrentAllReduceLog) {
  std::vector<NcclTestsRun> runs = parse_fixture("all_reduce_perf-8xH100.log");
  ASSERT_EQ(runs.size(), 1u);
  const NcclTestsRun& run = runs[0];
  EXPECT_EQ(run.test, "all_reduce_perf");
  EXPECT_EQ(run.collective, OpKind::all_reduce);
  EXPECT_EQ(run.collective_from, "the log");
  ASSERT_EQ(run.ranks.size(), 8u);
  EXPECT_EQ(run.ranks[7].host, "dgx-h100-01");
  EXPECT_EQ(run.ranks[7].device, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(run.rows.size(), 25u);  // 8 B to 128 MiB
  EXPECT_EQ(run.rows.front().size_bytes, 8);
  EXPECT_DOUBLE_EQ(run.rows.front().time_us, 17.50);  // out-of-place, not in-place's 17.33
  EXPECT_EQ(run.rows.front().line, 18);
  EXPECT_EQ(run.rows.back().size_bytes, 134217728);

  CollectiveTable table = collective_table_from_run(run, std::nullopt);
  EXPECT_EQ(table.gpu, "H100-SXM-80GB");
  EXPECT_EQ(table.group_size, 8);
  EXPECT_EQ(table.ranks_per_node, 8);
  EXPECT_EQ(table.nodes, 1);
  // algbw = size / time, busbw = algbw x 2(n-1)/n, recomputed (the log's 0.00 GB/s rows stay positive).
  const CollectivePoint& last = table.points.back();
  EXPECT_NEAR(last.algbw_GBps, 134217728 / last.time_us / 1e3, 1e-9);
  EXPECT_NEAR(last.busbw_GBps, last.algbw_GBps * 1.75, 1e-9);
  EXPECT_GT(table.points.front().algbw_GBps, 0);
  EXPECT_GT(table.fit.bandwidth.peak, 0.5);  // about 360 GB/s of NVLink's 450
  EXPECT_LT(table.fit.bandwidth.peak, 1.0);
}

TEST(NcclTestsLog, OlderLogOverTwoHostsTakesTheCollectiveFromItsFileName) {
  std::vector<NcclTestsRun> runs = parse_fixture("allgather-2x4xA100.txt");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].test.empty());
  EXPECT_EQ(runs[0].collective, OpKind::all_gather);
  EXPECT_EQ(runs[0].collective_from, "the file name");
  EXPECT_EQ(runs[0].rows.size(), 5u);  // NCCL INFO lines, even one starting with a digit, are skipped
  CollectiveTable table = collective_table_from_run(runs[0], std::nullopt);
  EXPECT_EQ(table.gpu, "A100-SXM-80GB");
  EXPECT_EQ(table.group_size, 8);
  EXPECT_EQ(table.ranks_per_node, 4);
  EXPECT_EQ(table.nodes, 2);

  // --collective agrees; a collective whose busbw factor the rows contradict is refused at the first such row.
  EXPECT_EQ(parse_fixture("allgather-2x4xA100.txt", OpKind::all_gather)[0].collective_from, "--collective");
  try {
    parse_fixture("allgather-2x4xA100.txt", OpKind::all_reduce);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 18: busbw 6.3 / algbw 7.2 is not all_reduce's factor 1.75 over 8 ranks"),
              std::string::npos) << e.what();
  }
}

TEST(NcclTestsLog, FoldedTablesReadBackAndPriceTheLoggedTimes) {
  std::vector<NcclTestsRun> runs = parse_fixture("all_reduce_perf-8xH100.log");
  for (NcclTestsRun& run : parse_fixture("allgather-2x4xA100.txt")) runs.push_back(std::move(run));
  NcclTestsFold fold = fold_nccl_tests(load_profile("builtin"), runs, std::nullopt);
  ASSERT_EQ(fold.summary.size(), 2u);
  EXPECT_NE(fold.summary[0].find("all_reduce over 8 GPUs (8 per node, 1 node) on H100-SXM-80GB: 25 sizes"),
            std::string::npos) << fold.summary[0];
  EXPECT_NE(fold.summary[0].find("added"), std::string::npos);
  EXPECT_FALSE(fold.profile.builtin);
  EXPECT_EQ(fold.profile.provenance["nccl_tests"].size(), 2u);

  const Profile back = profile_from_json(to_json(fold.profile), "folded.json");
  const CollectiveTable* table = find_collective_table(back.collectives, "H100-SXM-80GB", OpKind::all_reduce, 8, 8, 1);
  ASSERT_NE(table, nullptr);
  for (const NcclTestsRow& row : runs[0].rows)
    EXPECT_NEAR(collective_table_time_us(*table, static_cast<double>(row.size_bytes)), row.time_us, 1e-6 * row.time_us);
  EXPECT_NE(find_collective_table(back.collectives, "A100-SXM-80GB", OpKind::all_gather, 8, 4, 2), nullptr);

  // Folding the same log again replaces its table; one log twice in one call is an error naming both.
  NcclTestsFold again = fold_nccl_tests(back, {runs[0]}, std::nullopt);
  EXPECT_EQ(again.profile.collectives.size(), back.collectives.size());
  EXPECT_NE(again.summary[0].find("replaced"), std::string::npos);
  EXPECT_EQ(again.profile.provenance["nccl_tests"].size(), 3u);
  EXPECT_THROW(fold_nccl_tests(back, {runs[0], runs[0]}, std::nullopt), InputError);
}

// The fixture's text with `from` replaced by `to` (first occurrence).
std::string edited(const std::string& name, const std::string& from, const std::string& to) {
  std::string text = fixture(name);
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

void expect_log_error(const std::string& text, const std::string& file, const std::string& words,
                      std::optional<OpKind> collective = std::nullopt) {
  try {
    for (const NcclTestsRun& run : parse_nccl_tests_log(text, file, collective)) collective_table_from_run(run, std::nullopt);
    ADD_FAILURE() << "no error for " << words;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), file);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(NcclTestsLog, BadLogsAreNamedAtTheirLine) {
  const std::string log = "all_reduce_perf-8xH100.log";
  expect_log_error("", "empty.log", "no nccl-tests results");
  expect_log_error(edited(log, "       0    17.33", "       3    17.33"), "a.log",
                   "line 18: #wrong 3: the collective returned wrong results");
  expect_log_error(edited(log, "    17.50    0.00", "    abc      0.00"), "a.log",
                   "line 18: expected a number >= 0 in column time (us), got \"abc\"");
  expect_log_error(edited(log, "          16             4", "           4             1"), "a.log",
                   "line 19: expected a size above the previous row's 8 B");
  expect_log_error(edited(log, "sum      -1    17.50    0.00    0.00       0    17.33    0.00    0.00       0",
                          "sum      -1    17.50"),
                   "a.log", "line 18: expected a result row of at least 9 columns, got 6");
  expect_log_error(edited(log, "all_reduce_perf\n# nThread", "broadcast_perf\n# nThread"), "a.log",
                   "line 2: broadcast_perf: twin keeps tables of all_reduce, all_gather, reduce_scatter, alltoall, sendrecv");
  expect_log_error(fixture(log), "a.log", "line 2: the log ran all_reduce_perf, and --collective says alltoall",
                   OpKind::all_to_all);
  expect_log_error(edited(log, "NVIDIA H100 80GB HBM3\n#  Rank  4", "NVIDIA A100-SXM4-80GB\n#  Rank  4"), "a.log",
                   "line 9: device \"NVIDIA A100-SXM4-80GB\" differs from rank 0's \"NVIDIA H100 80GB HBM3\"");
  expect_log_error(edited(log, "#  Rank  3 Group", "#  Rank  4 Group"), "a.log",
                   "line 9: expected Rank 3 (Rank lines in order from 0), got Rank 4");
  expect_log_error(edited(log, "#  Rank  3 Group  0 Pid  41257 on", "#  Rank  3 Group  0 Pid  41257 at"), "a.log",
                   "line 9: expected a device line");
  // No collective in the log or the file name.
  expect_log_error(fixture("allgather-2x4xA100.txt"), "run-8.txt", "line 1: cannot tell which collective ran");
  // Uneven hosts: 5 + 3.
  expect_log_error(edited("allgather-2x4xA100.txt", "on     node-b device  0", "on     node-a device  0"),
                   "allgather.txt", "line 4: host node-a runs 5 of the 8 ranks");
  // One GPU is no group.
  std::string one_rank = fixture(log);
  for (int r = 1; r < 8; ++r) {
    const std::size_t at = one_rank.find(fmt::format("#  Rank  {} Group", r));
    one_rank.erase(at, one_rank.find('\n', at) - at + 1);
  }
  expect_log_error(one_rank, "a.log", "line 2: expected at least 2 \"#  Rank\" lines");
  expect_log_error(edited(log, "time   algbw   busbw  #wrong     time", "cputime   algbw   busbw  #wrong     time"),
                   "a.log", "line 16: expected GPU time columns");
}

TEST(NcclTestsLog, DeviceNamesMapToPresetsOrAskForGpu) {
  std::string l40 = fixture("all_reduce_perf-8xH100.log");
  for (std::size_t at; (at = l40.find("NVIDIA H100 80GB HBM3")) != std::string::npos;) l40.replace(at, 21, "NVIDIA L40S");
  std::vector<NcclTestsRun> runs = parse_nccl_tests_log(l40, "l40.log");
  try {
    collective_table_from_run(runs[0], std::nullopt);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 6: no GPU preset matches device \"NVIDIA L40S\"; give --gpu"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(collective_table_from_run(runs[0], "H200-141GB").gpu, "H200-141GB");
  // A GPU whose links could not have carried the log's bandwidth (32 GB/s of PCIe against about 360 GB/s).
  try {
    collective_table_from_run(runs[0], "RTX-4090");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x the 32 GB/s of RTX-4090's links, outside [0.001, 10]: is the GPU right"),
              std::string::npos) << e.what();
  }
}

// Two runs in one log, one after the other: the first names its collective, the second (an older nccl-tests)
// takes the file name's.
TEST(NcclTestsLog, SeveralRunsInOneLog) {
  const std::string first = fixture("all_reduce_perf-8xH100.log");
  std::vector<NcclTestsRun> runs =
      parse_nccl_tests_log(first + fixture("allgather-2x4xA100.txt"), "node-allgather-and-more.log");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].collective, OpKind::all_reduce);
  EXPECT_EQ(runs[0].rows.size(), 25u);
  EXPECT_EQ(runs[1].collective, OpKind::all_gather);
  EXPECT_EQ(runs[1].collective_from, "the file name");
  const int first_lines = static_cast<int>(std::count(first.begin(), first.end(), '\n'));
  EXPECT_EQ(runs[1].first_line, first_lines + 1);
  EXPECT_EQ(runs[1].ranks.size(), 8u);
  EXPECT_EQ(runs[1].rows.front().line, first_lines + 18);
}

TEST(NcclTestsLog, CollectiveNames) {
  EXPECT_EQ(nccl_tests_collective("all_reduce_perf"), OpKind::all_reduce);
  EXPECT_EQ(nccl_tests_collective("reduce_scatter"), OpKind::reduce_scatter);
  EXPECT_EQ(nccl_tests_collective("alltoall_perf"), OpKind::all_to_all);
  EXPECT_EQ(nccl_tests_collective("sendrecv_perf"), OpKind::send);
  EXPECT_FALSE(nccl_tests_collective("broadcast_perf").has_value());
  EXPECT_FALSE(nccl_tests_collective("_perf").has_value());
}

}  // namespace
}  // namespace twin
