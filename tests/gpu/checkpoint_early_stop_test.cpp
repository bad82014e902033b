// twin execute on one GPU of a DeepSeek-V3-shaped stack (MLA, a dense first layer, shared and routed experts) under
// full recompute, whole and stopped early (framework.checkpoint_early_stop): both run, and the early stop's losses are
// the whole recompute's bit for bit (the values the backward reads are the same). Holds two things at once: the early
// stop (executor/recompute_check.hpp) and the shared experts' forward, which threw from 2026-12-04 until 2026-12-05
// (executor/gpu/dense_block_recompute.cpp) with no test of test_gpu running a shared-expert stack.
#include <cmath>
#include <filesystem>
#include <fstream>
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

// The losses `twin execute` wrote in metrics.json's steps (doubles as the run computed them, not a rounded CSV).
std::vector<double> losses(const std::filesystem::path& metrics_json) {
  nlohmann::json metrics;
  std::ifstream(metrics_json) >> metrics;
  std::vector<double> out;
  for (const nlohmann::json& step : metrics.at("steps")) out.push_back(step.at("loss").get<double>());
  return out;
}

// Simulates the scenario pinned to full recompute and micro-batch 4, runs its best plan four steps; its losses.
std::vector<double> run_full_recompute(bool early_stop) {
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
  return losses(settings.out / "metrics.json");
}

TEST(CheckpointEarlyStop, ASharedExpertStackRunsAndStopsEarlyWithTheWholeRecomputesLosses) {
  REQUIRE_GPU();
  const std::vector<double> whole = run_full_recompute(false), early = run_full_recompute(true);
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_EQ(early, whole);
  for (double loss : whole) EXPECT_TRUE(std::isfinite(loss)) << loss;
}

}  // namespace
}  // namespace twin
