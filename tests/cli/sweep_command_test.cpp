// End to end: `twin sweep` writes the scaling report and a run folder per point and prints a line per point;
// `twin simulate` refuses a scenario with a sweep section (exit 1, naming /sweep) and leaves --out as it was.
#include <gtest/gtest.h>

#include <filesystem>

#include "run_twin.hpp"
#include "small_scenario.hpp"

namespace twin::test {
namespace {

TEST(SweepCommand, WritesTheScalingReportAndEachPoint) {
  TempDir dir("sweep-command");
  nlohmann::json scenario = small_scenario();
  scenario["sweep"] = {{"global_batch_size", {8, 16}}};
  scenario["cost"] = {{"currency", "EUR"}, {"price_per_gpu_hour", 3}, {"tokens_to_train", 2e9}};
  write_file(dir.path / "s.json", scenario.dump());
  const Outcome run =
      run_twin("sweep " + (dir.path / "s.json").string() + " --out " + (dir.path / "out").string() + " --jobs 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("global_batch_size=16: 4 GPUs, best "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("EUR per million tokens"), std::string::npos) << run.output;
  for (const char* file : {"scaling.csv", "scaling.html", "points/global_batch_size-8/report.html",
                           "points/global_batch_size-16/ranking.csv"})
    EXPECT_TRUE(std::filesystem::exists(dir.path / "out" / file)) << file;
  EXPECT_NE(read_file(dir.path / "out" / "scaling.html").find("points/global_batch_size-16/report.html"),
            std::string::npos);

  const Outcome refused =
      run_twin("simulate " + (dir.path / "s.json").string() + " --out " + (dir.path / "single").string());
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("s.json: at /sweep: expected no sweep section"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "single" / "ranking.csv"));
}

}  // namespace
}  // namespace twin::test
