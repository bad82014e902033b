// strategy.pipelines in scenario JSON: both device forms, the round trip, and every error with its path.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"

namespace twin {
namespace {

using nlohmann::json;

json mixed() {
  return json::parse(R"({
    "model": {"preset": "llama2-7b"},
    "training": {"seq_length": 4096, "global_batch_size": 12},
    "cluster": {"nodes": [
      {"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nics": {"count": 8, "bandwidth_Gbps": 400}},
      {"count": 1, "gpu": "A100-SXM-40GB", "gpus_per_node": 8, "nics": {"count": 8, "bandwidth_Gbps": 200}}]},
    "strategy": {"recompute": "selective", "pipelines": [
      {"micro_batch_size": 1, "num_micro_batches": 8,
       "stages": [{"devices": [0, 1, 2, 3], "tensor_model_parallel_size": 4, "num_layers": 24},
                  {"devices": {"node_group": 1, "first": 0, "count": 8}, "num_layers": 8}]},
      {"micro_batch_size": 2, "num_micro_batches": 2,
       "stages": [{"devices": [4, 5], "num_layers": 32}]}]}
  })");
}

void expect_error(const json& document, const std::string& path, const std::string& part) {
  try {
    parse_scenario(document, "s.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(HeterogeneousParse, BothDeviceFormsAndTheRoundTrip) {
  const Scenario s = parse_scenario(mixed(), "s.json");
  ASSERT_EQ(s.pipelines.size(), 2u);
  EXPECT_EQ(s.pipelines[0].stages[1].devices, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(s.pipelines[0].stages[1].tensor_model_parallel_size, 8);  // defaults to the device count
  EXPECT_EQ(s.pipelines[1].micro_batch_size, 2);
  EXPECT_EQ(s.strategy->recompute, Recompute::selective);
  EXPECT_EQ(parse_scenario(to_json(s), "s.json"), s);
}

TEST(HeterogeneousParse, ErrorsNameThePathAndTheRule) {
  json d = mixed();
  d["strategy"]["pipelines"][1]["stages"][0]["devices"] = {4, 16};
  expect_error(d, "/strategy/pipelines/1/stages/0/devices/1", "expected an integer");
  d = mixed();
  d["strategy"]["pipelines"][1]["stages"][0]["devices"] = {3, 4};
  expect_error(d, "/strategy/pipelines/1/stages/0/devices", "device 3 is used twice (already by /strategy/pipelines/0/stages/0)");
  d = mixed();
  d["strategy"]["pipelines"][1]["stages"][0]["num_layers"] = 31;
  expect_error(d, "/strategy/pipelines/1/stages", "sum to the model's 32, got 31");
  d = mixed();
  d["strategy"]["pipelines"][1]["num_micro_batches"] = 3;
  expect_error(d, "/strategy/pipelines", "sum to global_batch_size 12, got 14");
  d = mixed();
  d["strategy"]["pipelines"][1]["stages"][0]["tensor_model_parallel_size"] = 1;
  expect_error(d, "/strategy/pipelines/1/stages/0/tensor_model_parallel_size", "equal to the stage's 2 devices");
  d = mixed();
  d["strategy"]["pipelines"][1]["stages"][0]["devices"] = {4, 5, 6};
  expect_error(d, "/strategy/pipelines/1/stages/0", "does not divide num_attention_heads 32");
  d = mixed();
  d["strategy"]["pipelines"][0]["stages"][1]["devices"] = {{"node_group", 1}, {"first", 4}, {"count", 4}};
  d["strategy"]["pipelines"][1]["stages"][0]["devices"] = {6, 7, 8, 9};
  expect_error(d, "/strategy/pipelines/1/stages/0/devices", "on one node");
  d = mixed();
  d["strategy"]["pipelines"][0]["stages"][1]["devices"] = {{"node_group", 1}, {"first", 4}, {"count", 8}};
  expect_error(d, "/strategy/pipelines/0/stages/1/devices/count", "expected at most 4");
  d = mixed();
  d["strategy"]["tensor_model_parallel_size"] = 2;
  expect_error(d, "/strategy/tensor_model_parallel_size", "unknown key");
  d = mixed();
  d["strategy"]["schedule"] = "interleaved-1f1b";
  expect_error(d, "/strategy/schedule", "\"gpipe\" or \"1f1b\"");
  d = mixed();
  d["model"] = {{"preset", "mixtral-8x7b"}};
  expect_error(d, "/strategy/pipelines", "dense models only");
}

}  // namespace
}  // namespace twin
