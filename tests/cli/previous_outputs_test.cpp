// A run that fails leaves the previous outputs of its folder exactly as they were, and two runs into one folder
// never mix nor fail with a library's message: the second is told the folder is in use (core/folder_lock.hpp).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <csignal>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "run_twin.hpp"
#include "small_scenario.hpp"

namespace twin::test {
namespace {

namespace fs = std::filesystem;

const std::string kShippedScenarios = std::string(TWIN_SOURCE_DIR) + "/scenarios/";

// Every file under `out` with its content (a run's lock file goes with the run).
std::map<std::string, std::string> snapshot(const fs::path& out) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(out))
    files[fs::relative(entry.path(), out).string()] = entry.is_regular_file() ? read_file(entry.path()) : "(folder)";
  return files;
}

// A folder `out` holding a run's outputs (best.json, traces, ...) of the small scenario `scenario`.
struct PreviousRun {
  fs::path out, scenario;
  std::map<std::string, std::string> outputs;
};

PreviousRun previous_run(const TempDir& dir) {
  PreviousRun run{dir.path / "out", dir.path / "s.json", {}};
  write_file(run.scenario, small_scenario().dump());
  const Outcome outcome = run_twin("simulate " + run.scenario.string() + " --quiet --top 2 --out " + run.out.string());
  EXPECT_EQ(outcome.exit_code, 0) << outcome.output;
  run.outputs = snapshot(run.out);
  EXPECT_EQ(run.outputs.count("best.json"), 1u);
  return run;
}

// The one check after the search that can fail on the user's input: a --plan-key naming no candidate.
TEST(PreviousOutputs, ARunRefusedAfterTheSearchLeavesThemExactlyAsTheyWere) {
  TempDir dir("previous");
  const PreviousRun previous = previous_run(dir);
  const Outcome run = run_twin("simulate " + previous.scenario.string() + " --quiet --top 2 --plan-key nope --out " +
                               previous.out.string());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("--plan-key: expected the key of a simulated candidate (the fastest: \"tp"),
            std::string::npos) << run.output;
  EXPECT_NE(run.output.find("got \"nope\"; " + previous.out.string() + " is left as it was"), std::string::npos)
      << run.output;
  EXPECT_EQ(snapshot(previous.out), previous.outputs);
}

// `twin simulate SCENARIO --quiet --jobs 1 --out OUT` as a child of this process, its output discarded.
pid_t start_simulate(const std::string& scenario, const fs::path& out) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(126);
    execl(TWIN_BINARY, TWIN_BINARY, "simulate", scenario.c_str(), "--quiet", "--jobs", "1", "--out", out.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Whether the run `pid` holds the folder within 60 s: its pid in the folder's lock file.
bool holds_within_a_minute(const fs::path& out, pid_t pid) {
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(out / ".twin-lock") && read_file(out / ".twin-lock") == std::to_string(pid) + "\n") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(PreviousOutputs, ASecondRunIntoAFolderInUseIsToldSoAndChangesNothing) {
  TempDir dir("two_runs");
  const PreviousRun previous = previous_run(dir);
  // The 70B search on 1,024 GPUs takes many seconds: the second run comes while it holds the folder.
  const pid_t first = start_simulate(kShippedScenarios + "llama2-70b-1024xH100.json", previous.out);
  ASSERT_GT(first, 0);
  ASSERT_TRUE(holds_within_a_minute(previous.out, first));
  const Outcome second = run_twin("simulate " + previous.scenario.string() + " --quiet --out " + previous.out.string());
  EXPECT_EQ(second.exit_code, 1) << second.output;
  const std::string refusal = ": in use by another twin run (pid " + std::to_string(first) + ")";
  EXPECT_NE(second.output.find(previous.out.string() + refusal), std::string::npos) << second.output;

  kill(first, SIGINT);  // an interrupted run leaves the previous outputs too
  int status = 0;
  ASSERT_EQ(waitpid(first, &status, 0), first);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT) << status;
  EXPECT_EQ(snapshot(previous.out), previous.outputs);
  EXPECT_EQ(run_twin("simulate " + previous.scenario.string() + " --quiet --out " + previous.out.string()).exit_code, 0);
}

}  // namespace
}  // namespace twin::test
