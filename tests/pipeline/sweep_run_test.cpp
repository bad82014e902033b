// twin sweep's pipeline: one run folder per point and the scaling report, the same bytes whatever the threads; a
// point that is not a valid scenario named; the work estimate refused beyond its limit with the estimate; and a
// single simulation refusing a sweep section.
#include "pipeline/sweep_run.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tests/cli/run_twin.hpp"
#include "tests/cli/small_scenario.hpp"

namespace twin {
namespace {

using nlohmann::json;

SimulateSettings settings_into(const std::filesystem::path& out, int jobs) {
  SimulateSettings settings;
  settings.out = out;
  settings.top = 0;
  settings.jobs = jobs;
  return settings;
}

// The small scenario with NICs, so that it can grow to several nodes.
json small_with_nics() {
  json d = test::small_scenario();
  d["cluster"]["nodes"][0]["nics"] = {{"count", 4}, {"bandwidth_Gbps", 400}};
  return d;
}

json small_sweep() {
  json d = small_with_nics();
  d["sweep"] = {{"nodes", {1, 2}}};
  d["cost"] = {{"price_per_gpu_hour", 2.5}, {"tokens_to_train", 1e9}};
  return d;
}

std::string expect_input_error(const json& document, std::string& path) {
  const test::TempDir dir("sweep-error");
  try {
    sweep_scenario(read_scenario_input(document, "s.json"), settings_into(dir.path / "out", 1));
  } catch (const InputError& e) {
    path = e.json_path();
    EXPECT_FALSE(std::filesystem::exists(dir.path / "out" / "scaling.csv"));
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(SweepRun, WritesEachPointAndTheScalingReportDeterministically) {
  const test::TempDir dir("sweep-run");
  const ScenarioInput input = read_scenario_input(small_sweep(), "s.json");
  const SweepOutcome one = sweep_scenario(input, settings_into(dir.path / "a", 1));
  sweep_scenario(input, settings_into(dir.path / "b", 2));
  ASSERT_EQ(one.rows.size(), 2u);
  EXPECT_EQ(one.fields, std::vector<std::string>{"nodes"});
  EXPECT_EQ(one.rows[0].gpus, 4);
  EXPECT_EQ(one.rows[1].gpus, 8);
  ASSERT_TRUE(one.rows[1].best && one.rows[1].cost);
  EXPECT_GT(one.rows[1].cost->cost_per_million_tokens, 0);
  for (const char* file : {"scaling.csv", "scaling.html", "points/nodes-1/ranking.csv", "points/nodes-2/best.json"}) {
    const std::string a = test::read_file(dir.path / "a" / file);
    EXPECT_FALSE(a.empty()) << file;
    EXPECT_EQ(a, test::read_file(dir.path / "b" / file)) << file;
  }
  const std::string csv = test::read_file(dir.path / "a" / "scaling.csv");
  EXPECT_EQ(csv.rfind("nodes,gpus,candidates,feasible,best_strategy,", 0), 0u) << csv;
  EXPECT_NE(csv.find("cost_per_million_tokens_USD"), std::string::npos);
  EXPECT_NE(test::read_file(dir.path / "a" / "points/nodes-2/ranking.csv").find("cost_to_train_USD"), std::string::npos);
}

TEST(SweepRun, NamesThePointThatIsNotAValidScenario) {
  json d = test::small_scenario();
  d["model"]["position_embedding_rope"] = false;
  d["model"]["max_position_embeddings"] = 4096;
  d["sweep"] = {{"seq_length", {2048, 8192}}};
  std::string path;
  const std::string message = expect_input_error(d, path);
  EXPECT_EQ(path, "/training/seq_length");
  EXPECT_NE(message.find("at sweep point seq_length=8192: expected at most max_position_embeddings 4096"),
            std::string::npos)
      << message;
}

TEST(SweepRun, RefusesWorkBeyondItsLimitWithTheEstimate) {
  json d = small_with_nics();
  d["search"] = {{"tensor_model_parallel_size", {1, 2, 4}}, {"pipeline_model_parallel_size", {1, 2, 4}},
                 {"context_parallel_size", {1, 2}}, {"virtual_pipeline_model_parallel_size", {1, 2}},
                 {"sequence_parallel", {true, false}}, {"micro_batch_size", {1, 2, 4, 8}},
                 {"zero_stage", {0, 1, 2, 3}}, {"recompute", {"none", "selective", "full"}},
                 {"schedule", {"gpipe", "1f1b", "interleaved-1f1b"}}};
  d["training"]["global_batch_size"] = 512;
  d["sweep"] = {{"nodes", {8, 16}}, {"seq_length", {1024, 2048, 4096, 8192}}};
  std::string path;
  const std::string message = expect_input_error(d, path);
  EXPECT_EQ(path, "/sweep");
  EXPECT_NE(message.find("expected a sweep of at most 20000 candidates to simulate in all"), std::string::npos)
      << message;
  EXPECT_NE(message.find("over 8 points"), std::string::npos) << message;
}

TEST(SweepRun, ASingleSimulationRefusesASweepAndASweepNeedsOne) {
  const test::TempDir dir("sweep-refused");
  try {
    simulate_scenario(read_scenario_input(small_sweep(), "s.json"), settings_into(dir.path / "out", 1));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/sweep");
  }
  std::string path;
  const std::string message = expect_input_error(test::small_scenario(), path);
  EXPECT_NE(message.find("expected a \"sweep\" section"), std::string::npos) << message;
}

}  // namespace
}  // namespace twin
