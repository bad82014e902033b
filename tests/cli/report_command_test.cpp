// End to end: `twin report` on a copy of a recorded run writes execution_report.html, the same bytes
// twice; a folder that is not an executed run fails with the missing file named and exit 1.
#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

#include "core/plan_file.hpp"
#include "run_twin.hpp"

namespace twin::test {
namespace {

std::filesystem::path copy_fixture(const std::string& name, const std::filesystem::path& dir) {
  const std::filesystem::path copy = dir / name;
  std::filesystem::copy(std::filesystem::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/executed" / name, copy,
                        std::filesystem::copy_options::recursive);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(copy))
    std::filesystem::permissions(entry.path(), std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  return copy;
}

TEST(ReportCommand, WritesTheExecutionReportIntoTheRunFolder) {
  TempDir dir("report-command");
  const std::filesystem::path run = copy_fixture("7b4l-mbs1-h200", dir.path);
  Outcome first = run_twin("report " + run.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("predicted 76.213 ms, measured 66.195 ms (-13.1%)"), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("largest contributor: optimizer.opt (-7.991 ms)"), std::string::npos) << first.output;
  const std::string html = read_file(run / "execution_report.html");
  EXPECT_NE(html.find("simulated: stage 0"), std::string::npos);
  EXPECT_NE(html.find("measured: rank 0, iteration 9"), std::string::npos);

  // --out elsewhere: the same bytes.
  Outcome second = run_twin("report " + run.string() + " --out " + (dir.path / "again" / "r.html").string());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(read_file(dir.path / "again" / "r.html"), html);
  int temporaries = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path))
    temporaries += entry.path().extension() == ".tmp";
  EXPECT_EQ(temporaries, 0);
}

TEST(ReportCommand, AFolderThatIsNotAnExecutedRun) {
  TempDir dir("report-not-a-run");
  write_file(dir.path / "best.json", "{}");
  Outcome run = run_twin("report " + dir.path.string());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find((dir.path / "metrics.json").string()), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("ops.csv"), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "execution_report.html"));
}

// A FIFO would block a reader and a folder is no file: each is named for what it is, not "not found".
TEST(ReportCommand, AFifoOrFolderInPlaceOfARunFileIsNamedForWhatItIs) {
  TempDir dir("report-fifo");
  const std::filesystem::path run = copy_fixture("small-single-h200", dir.path);
  std::filesystem::remove(run / "metrics.json");
  ASSERT_EQ(mkfifo((run / "metrics.json").c_str(), 0600), 0);
  Outcome outcome = run_twin("report " + run.string());
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_NE(outcome.output.find((run / "metrics.json").string() + ": is a FIFO, not a regular file"), std::string::npos)
      << outcome.output;
  std::filesystem::remove(run / "ops.csv");
  std::filesystem::create_directory(run / "ops.csv");
  std::filesystem::remove(run / "metrics.json");
  std::filesystem::copy_file(std::filesystem::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/executed/small-single-h200" /
                                 "metrics.json", run / "metrics.json");
  outcome = run_twin("report " + run.string());
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_NE(outcome.output.find((run / "ops.csv").string() + ": is a folder, not a regular file"), std::string::npos)
      << outcome.output;
  EXPECT_EQ(outcome.output.find("not found"), std::string::npos) << outcome.output;
}

TEST(ReportCommand, APlanOfAnotherLoweringSaysWhatWasExpectedAndWhatWasFound) {
  TempDir dir("report-lowering");
  const std::filesystem::path run = copy_fixture("small-single-h200", dir.path);
  std::string plan = read_file(run / "best.json");
  const std::string current = "\"lowering_version\": " + std::to_string(kLoweringVersion);
  ASSERT_NE(plan.find(current), std::string::npos);
  plan.replace(plan.find(current), current.size(), "\"lowering_version\": 4");
  write_file(run / "best.json", plan);
  Outcome outcome = run_twin("report " + run.string());
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_NE(outcome.output.find("best.json: at /lowering_version: expected " + std::to_string(kLoweringVersion) +
                                ", got 4 ("),
            std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("simulate again)"), std::string::npos) << outcome.output;
}

TEST(ReportCommand, MalformedOpsCsvNamesTheLine) {
  TempDir dir("report-bad-csv");
  const std::filesystem::path run = copy_fixture("small-single-h200", dir.path);
  std::string csv = read_file(run / "ops.csv");
  csv.replace(csv.find(",compute,"), 9, ",compute,x");
  write_file(run / "ops.csv", csv);
  Outcome outcome = run_twin("report " + run.string());
  EXPECT_EQ(outcome.exit_code, 1) << outcome.output;
  EXPECT_NE(outcome.output.find("ops.csv: at line 2, column predicted_start_ns"), std::string::npos) << outcome.output;
}

TEST(ReportCommand, HelpNamesWhatItReads) {
  Outcome help = run_twin("report --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* part : {"metrics.json", "ops.csv", "best.json", "--out", "--plan", "--rank"})
    EXPECT_NE(help.output.find(part), std::string::npos) << part;
}

}  // namespace
}  // namespace twin::test
