// Bad input: every kind gives one clear line naming the file, the JSON path and what was expected,
// and a non-zero exit, and leaves no output behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include "run_twin.hpp"

namespace twin::test {
namespace {

struct BadCase {
  const char* name;
  const char* scenario;
  const char* json_path;  // must appear in the message ("" for malformed JSON)
  const char* expected;   // a phrase of the expectation
};

// 12 GPUs, so that a tensor-parallel size of 3 divides the world and the heads rule is the one broken.
const char* kCluster = R"("cluster": { "nodes": [ { "count": 3, "gpu": "H100-SXM-80GB", "gpus_per_node": 4, "nics": { "count": 4, "bandwidth_Gbps": 400 } } ] })";

std::string scenario_with(const std::string& model, const std::string& training, const std::string& rest = "") {
  return "{ \"name\": \"bad\", \"model\": " + model + ", \"training\": " + training + ", " + kCluster + rest + " }";
}

void PrintTo(const BadCase& bad, std::ostream* out) { *out << bad.name; }

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, NamesFileJsonPathAndExpectation) {
  const BadCase& bad = GetParam();
  TempDir dir(bad.name);
  auto file = dir.path / (std::string(bad.name) + ".json");
  write_file(file, bad.scenario);
  Outcome run = run_twin("simulate " + file.string() + " --quiet --out " + (dir.path / "out").string());
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(file.filename().string()), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(bad.json_path), std::string::npos) << run.output;
  EXPECT_NE(run.output.find(bad.expected), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path / "out" / "best.json"));
}

const std::string kTraining = R"({ "seq_length": 2048, "global_batch_size": 24 })";
const std::string kMalformed = R"({ "name": "x", "model": { "preset": "llama2-7b" )";
const std::string kUnknownPreset = scenario_with(R"({ "preset": "llama9-1t" })", kTraining);
const std::string kUnknownGpu = R"({ "name": "x", "model": { "preset": "llama2-7b" }, "training": { "seq_length": 2048, "global_batch_size": 16 },
  "cluster": { "nodes": [ { "count": 1, "gpu": "Z100", "gpus_per_node": 8 } ] } })";
const std::string kWrongType = scenario_with(R"({ "preset": "llama2-7b" })", R"({ "seq_length": 2048, "global_batch_size": "many" })");
const std::string kUnknownKey = scenario_with(R"({ "preset": "llama2-7b", "hiden_size": 4096 })", kTraining);
const std::string kEmptySpace = scenario_with(R"({ "preset": "llama2-7b" })", kTraining,
                                              R"(, "search": { "tensor_model_parallel_size": [] })");
const std::string kImpossibleStrategy = scenario_with(R"({ "preset": "llama2-7b" })", kTraining,
    R"(, "strategy": { "tensor_model_parallel_size": 3, "pipeline_model_parallel_size": 1 })");
// A pinned per-layer plan whose first layer's group (5) divides no stage of 12 GPUs.
const std::string kImpossiblePerLayer = scenario_with(R"({ "preset": "llama2-7b", "num_layers": 2 })", kTraining,
    R"(, "strategy": { "per_layer": { "pipeline_model_parallel_size": 1, "stage_micro_batch_size": 12,
         "num_micro_batches": 2, "schedule": "1f1b", "stage_num_layers": [2],
         "layers": [ { "layout": "tensor", "group_size": 5, "zero_stage": 0, "recompute": "none" },
                     { "layout": "tensor", "group_size": 4, "zero_stage": 0, "recompute": "none" } ] } })");
// A pinned hot-switching plan whose first phase states 17 packs where its 18 sequences of 1,024 make 18.
const std::string kImpossibleHotSwitch = scenario_with(
    R"({ "preset": "llama2-7b", "num_layers": 2 })",
    R"({ "seq_length": 2048, "global_batch_size": 24,
         "seq_length_buckets": [ { "max": 1024, "fraction": 0.75 }, { "max": 2048, "fraction": 0.25 } ] })",
    R"(, "strategy": { "hot_switch": { "phases": [ { "min_length_exclusive": 0, "max_length": 1024,
         "sequences": 18, "tokens": 18432, "packs": 17 } ] } })");

INSTANTIATE_TEST_SUITE_P(
    Scenarios, BadInput,
    ::testing::Values(BadCase{"malformed", kMalformed.c_str(), "", "JSON"},
                      BadCase{"unknown_preset", kUnknownPreset.c_str(), "/model/preset", "llama2-7b"},
                      BadCase{"unknown_gpu", kUnknownGpu.c_str(), "/cluster/nodes/0/gpu", "H100-SXM-80GB"},
                      BadCase{"wrong_type", kWrongType.c_str(), "/training/global_batch_size", "integer"},
                      BadCase{"unknown_key", kUnknownKey.c_str(), "/model", "hidden_size"},
                      BadCase{"empty_search_space", kEmptySpace.c_str(), "/search/tensor_model_parallel_size", "non-empty"},
                      BadCase{"impossible_strategy", kImpossibleStrategy.c_str(), "/strategy", "not divisible by tensor_model_parallel_size 3"},
                      BadCase{"impossible_per_layer", kImpossiblePerLayer.c_str(), "/strategy/per_layer/layers/0",
                              "a layer strategy a stage of 12 GPUs can run"},
                      BadCase{"impossible_hot_switch", kImpossibleHotSwitch.c_str(), "/strategy/hot_switch/phases/0/packs",
                              "18 (what the plan's scenario gives this phase)"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(BadInputFile, MissingFileIsBadInput) {
  Outcome run = run_twin("simulate /nonexistent/scenario.json");
  EXPECT_EQ(run.exit_code, 1);  // as the README says: 1 for bad input, 2 for a wrong command line
  EXPECT_NE(run.output.find("/nonexistent/scenario.json"), std::string::npos) << run.output;
}

TEST(BadInputFile, CorruptProfileNamesTheProfile) {
  TempDir dir("corrupt_profile");
  write_file(dir.path / "s.json", scenario_with(R"({ "preset": "llama2-7b" })", kTraining));
  write_file(dir.path / "p.json", "{ \"version\": 1, \"gpus\": [ ");
  Outcome run = run_twin("simulate " + (dir.path / "s.json").string() + " --profile " + (dir.path / "p.json").string() +
                         " --out " + (dir.path / "out").string());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("p.json"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace twin::test
