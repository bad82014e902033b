// `twin execute` refuses, before launching anything, plans that do not fit or that it does not run, and
// names the plan file, the JSON path and why. (Builds with the CUDA toolkit only: the command lives there.)
#ifdef TWIN_WITH_CUDA
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_twin.hpp"

namespace twin::test {
namespace {

const std::string kScenarioDir = std::string(TWIN_SOURCE_DIR) + "/scenarios/";

// `twin simulate` of a scenario file into `dir`, returning the plan's path.
std::string plan_from(const TempDir& dir, const std::string& scenario_path) {
  Outcome run = run_twin("simulate " + scenario_path + " --out " + dir.path.string() + " --top 0 --quiet");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return (dir.path / "best.json").string();
}

// ... of a shipped scenario.
std::string plan_of(const TempDir& dir, const std::string& scenario) { return plan_from(dir, kScenarioDir + scenario); }

TEST(ExecuteCommand, RefusesAPlanThatDoesNotFitBeforeLaunch) {
  TempDir dir("execute-oom");
  const std::string plan_path = plan_of(dir, "llama3-8b-4xH200.json");
  // The same plan on 24 GB GPUs: the memory model says it does not fit.
  auto plan = nlohmann::json::parse(read_file(plan_path));
  plan["scenario"]["cluster"]["nodes"][0]["gpu"] = "RTX-4090";
  plan["scenario"]["cluster"]["nodes"][0].erase("intra_node");
  write_file(plan_path, plan.dump());
  Outcome run = run_twin("execute --plan " + plan_path + " --iters 5");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find(plan_path), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("/strategy"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("out of memory: "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(" GiB > 24.0 GiB"), std::string::npos) << run.output;
}

// A context-parallel plan passes every check before launch in its ring form (what stops it here is the GPUs it
// needs); in its all-gathered form it is refused, naming the switch.
TEST(ExecuteCommand, RunsContextParallelismAsARingOnly) {
  TempDir dir("execute-cp");
  auto scenario = nlohmann::json::parse(read_file(kScenarioDir + "llama3-8b-4xH200.json"));
  for (const char* axis : {"tensor_model_parallel_size", "pipeline_model_parallel_size",
                           "virtual_pipeline_model_parallel_size", "micro_batch_size"})
    scenario["search"][axis] = {1};
  scenario["search"]["context_parallel_size"] = {2};
  write_file(dir.path / "cp.json", scenario.dump());
  Outcome ring = run_twin("execute --plan " + plan_from(dir, (dir.path / "cp.json").string()) + " --iters 5");
  EXPECT_EQ(ring.exit_code, 1) << ring.output;
  EXPECT_EQ(ring.output.find("context_parallel"), std::string::npos) << ring.output;
  EXPECT_EQ(ring.output.find("cp_comm_type"), std::string::npos) << ring.output;
  scenario["framework"]["cp_comm_type"] = "all_gather";
  write_file(dir.path / "cp-gathered.json", scenario.dump());
  Outcome gathered =
      run_twin("execute --plan " + plan_from(dir, (dir.path / "cp-gathered.json").string()) + " --iters 5");
  EXPECT_EQ(gathered.exit_code, 1) << gathered.output;
  EXPECT_NE(gathered.output.find("/scenario/framework/cp_comm_type"), std::string::npos) << gathered.output;
}

// The Mixtral scenario's winner (EP 8 over 64 data-parallel GPUs, ZeRO-1) passes every check before launch:
// what stops it here is the GPUs it needs.
TEST(ExecuteCommand, AcceptsTheExpertParallelWinnerBeforeLaunch) {
  TempDir dir("execute-moe");
  const std::string plan_path = plan_of(dir, "mixtral-8x7b-64xH100.json");
  Outcome run = run_twin("execute --plan " + plan_path + " --iters 5");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_EQ(run.output.find("expert parallelism"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("does not run"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("GPU"), std::string::npos) << run.output;
}

TEST(ExecuteCommand, RefusesAFamilyPlanInsteadOfRunningItsHomeStrategy) {
  TempDir dir("execute-family");
  // A family plan no command reads back: running its home strategy alone would run another plan (a per-layer
  // plan's once failed as "out of memory: 77.7 GiB > 40.0 GiB").
  auto plan = nlohmann::json::parse(read_file(plan_of(dir, "llama2-13b-8xA100-40GB-per-layer.json")));
  plan["family_plan"] = {{"family", "pipelined"}, {"key", "pipelined.pp2"}};
  write_file(dir.path / "family.json", plan.dump());
  Outcome run = run_twin("execute --plan " + (dir.path / "family.json").string() + " --iters 5");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("at /family_plan/family: expected a plan family"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("per-layer, heterogeneous"), std::string::npos) << run.output;
}

// The asymmetric plan over a mixed cluster, as `twin simulate` writes it (ZeRO-1 over its two pipelines): it passes
// every check before launch, and what stops it here is the GPUs it needs.
TEST(ExecuteCommand, AcceptsTheMixedClustersAsymmetricPlanBeforeLaunch) {
  TempDir dir("execute-asymmetric");
  const std::string plan_path = plan_of(dir, "mixed-h100-a100-fixed-plan.json");
  Outcome run = run_twin("execute --plan " + plan_path + " --iters 5");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_EQ(run.output.find("/family_plan"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("GPU"), std::string::npos) << run.output;
}

TEST(ExecuteCommand, RejectsMoreWarmUpThanIterations) {
  TempDir dir("execute-iters");
  const std::string plan_path = plan_of(dir, "llama3-8b-4xH200.json");
  Outcome run = run_twin("execute --plan " + plan_path + " --iters 3 --warmup 3");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("--iters 3 must exceed --warmup 3"), std::string::npos) << run.output;
}

TEST(ExecuteCommand, NamesTheAttentionImplementationsItKnows) {
  Outcome run = run_twin("execute --plan plan.json --attention flash3");
  EXPECT_EQ(run.exit_code, 2) << run.output;  // a wrong command line
  EXPECT_NE(run.output.find("expected cudnn, cudnn-deterministic or kernels"), std::string::npos) << run.output;
}

TEST(ExecuteCommand, BestNeedsTheRunFolder) {
  Outcome run = run_twin("execute --best --iters 5");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("--run"), std::string::npos) << run.output;
}

// twin hands its GPU commands to twin-gpu beside it (cli/gpu_binary.hpp), so that the other commands start
// without loading the CUDA libraries; the commands above ran through it.
TEST(ExecuteCommand, TwinLeavesTheCudaLibrariesToTwinGpu) {
  const std::filesystem::path twin_binary = TWIN_BINARY;
  ASSERT_TRUE(std::filesystem::exists(twin_binary.parent_path() / "twin-gpu"));
  const Outcome libraries = run_twin_under("ldd", "");
  EXPECT_EQ(libraries.exit_code, 0) << libraries.output;
  for (const char* library : {"libcublas", "libcudnn", "libnccl", "libcupti", "libcudart"})
    EXPECT_EQ(libraries.output.find(library), std::string::npos) << library << " in\n" << libraries.output;
  const Outcome help = run_twin("execute --help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_NE(help.output.find("--plan"), std::string::npos) << help.output;
}

}  // namespace
}  // namespace twin::test
#endif
