// twin execute on one GPU of a DeepSeek-V3-shaped stack (MLA, a dense first layer, shared and routed experts) under
// full recompute, whole and stopped early (framework.checkpoint_early_stop): both run, and the early stop's losses are
// the whole recompute's bit for bit (the values the backward reads are the same). Holds two things at once: the early
// stop (executor/recompute_check.hpp) and the shared experts' forward, which threw from 2026-12-04 until 2026-12-05
// (executor/gpu/dense_block_recompute.cpp) with no test of test_gpu running a shared-expert stack.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/scenario_input.hpp"
#include "executor/gpu/execute.hpp"
#include "pipeline/simulate_run.hpp"
#include "tests/gpu/kernel_test_util.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

const std::filesystem::path kSource = TWIN_SOURCE_DIR;

// The losses `twin execute` wrote in steps.csv (its column named "loss").
std::vector<std::string> losses(const std::filesystem::path& steps_csv) {
  std::ifstream in(steps_csv);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header;
  for (std::stringstream s(line); std::getline(s, line, ',');) header.push_back(line);
  const auto column = std::find(header.begin(), header.end(), "loss") - header.begin();
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    std::stringstream s(line);
    std::string field;
    for (long i = 0; i <= column && std::getline(s, field, ','); ++i) {}
    out.push_back(field);
  }
  return out;
}

// Simulates the scenario pinned to full recompute and micro-batch 4, runs its best plan four steps; its losses.
std::vector<std::string> run_full_recompute(bool early_stop) {
  nlohmann::json scenario;
  std::ifstream(kSource / "scenarios/exec-deepseek-v3-mla-small-1xH200.json") >> scenario;
  scenario["search"]["recompute"] = {"full"};
  scenario["search"]["micro_batch_size"] = {4};
  scenario["framework"]["checkpoint_early_stop"] = early_stop;
  const std::filesystem::path dir = test::scratch_path(early_stop ? "early" : "whole");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "scenario.json") << scenario.dump(1);
  SimulateSettings settings;
  settings.out = dir / "out";
  settings.top = 0;
  settings.quiet = true;
  const SimulateOutcome outcome = simulate_scenario(load_scenario_input(dir / "scenario.json"), settings);
  // The plan check's verdict is on the ranked candidates (outcome.best is copied before it).
  EXPECT_EQ(outcome.ranked.at(outcome.chosen).executable, "yes");
  exec::ExecuteRequest request;
  request.plan = (settings.out / "best.json").string();
  request.iterations = 4;
  request.warmup = 1;
  request.trace = false;
  request.attention = AttentionImplementation::cudnn_deterministic;
  EXPECT_EQ(exec::execute_main(request), 0);
  return losses(settings.out / "steps.csv");
}

TEST(CheckpointEarlyStop, ASharedExpertStackRunsAndStopsEarlyWithTheWholeRecomputesLosses) {
  REQUIRE_GPU();
  const std::vector<std::string> whole = run_full_recompute(false), early = run_full_recompute(true);
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_EQ(early, whole);
  for (const std::string& loss : whole) EXPECT_TRUE(std::isfinite(std::stod(loss))) << loss;
}

}  // namespace
}  // namespace twin
