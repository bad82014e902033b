// `twin calibrate --from-trace` of a PyTorch profiler trace, end to end: a real step folds and the command says
// which classes its kernels fell in and what it folded; each hostile trace (tests/cli/hostile/kineto/) is refused
// in one short line naming the file, with exit 1 and no profile written.
#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "run_twin.hpp"

namespace twin::test {
namespace {

namespace fs = std::filesystem;

TEST(CalibrateFrameworkTrace, ARealStepFoldsAndTheClassesArePrinted) {
  TempDir dir("framework_trace");
  const std::string trace = std::string(TWIN_SOURCE_DIR) + "/tests/traces/fixtures/kineto_L4_mb1_step.json.gz";
  const std::string scenario =
      std::string(TWIN_SOURCE_DIR) + "/docs/accuracy/pytorch-fsdp2-1xH200/scenarios/L4_mb1_none.json";
  const Outcome run = run_twin("calibrate --from-trace " + trace + " --scenario " + scenario + " --out " +
                               (dir.path / "p.json").string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (const char* expected : {"framework pytorch-fsdp2", "unmatched", "memory_bound in-situ prior", "host gaps"})
    EXPECT_NE(run.output.find(expected), std::string::npos) << expected << ": " << run.output;
  EXPECT_TRUE(fs::exists(dir.path / "p.json"));
  EXPECT_TRUE(fs::exists(dir.path / "p.changes.md"));
  const Outcome simulated = run_twin("simulate " + scenario + " --profile " + (dir.path / "p.json").string() +
                                     " --out " + (dir.path / "o").string());
  EXPECT_EQ(simulated.exit_code, 0) << simulated.output;
  EXPECT_NE(simulated.output.find("workload: pytorch-fsdp2 training"), std::string::npos) << simulated.output;
  EXPECT_EQ(simulated.output.find("the prediction is for"), std::string::npos) << "same framework: no warning";
  const Outcome blind = run_twin("simulate " + scenario + " --out " + (dir.path / "b").string());
  EXPECT_NE(blind.output.find("measured megatron-core kernels"), std::string::npos) << blind.output;
}

TEST(CalibrateFrameworkTrace, EveryHostileTraceIsRefusedInOneShortLine) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(std::string(TWIN_SOURCE_DIR) + "/tests/cli/hostile/kineto")) {
    TempDir dir("hostile_trace");
    const Outcome run = run_twin("calibrate --from-trace " + entry.path().string() + " --out " +
                                 (dir.path / "p.json").string());
    EXPECT_EQ(run.exit_code, 1) << entry.path() << run.output.substr(0, 500);
    EXPECT_NE(run.output.find(entry.path().filename().string()), std::string::npos) << run.output.substr(0, 500);
    EXPECT_LT(run.output.size(), 1500u) << entry.path();
    EXPECT_EQ(run.output.find('\n'), run.output.size() - 1) << "one line: " << run.output.substr(0, 500);
    EXPECT_FALSE(fs::exists(dir.path / "p.json")) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 7);
}

}  // namespace
}  // namespace twin::test
