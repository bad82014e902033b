// Scenario parsing semantics (presets fill, explicit fields win, defaults) and the to_json round trip.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/scenario.hpp"

namespace twin {
namespace {

using nlohmann::json;

json preset_scenario_on(const std::string& model, const json& gpu) {
  return {{"name", model},
          {"model", {{"preset", model}}},
          {"training", {{"seq_length", 2048}, {"global_batch_size", 256}}},
          {"cluster", {{"nodes", {{{"count", 1}, {"gpu", gpu}, {"gpus_per_node", 8}}}}}}};
}

void expect_round_trip(const Scenario& s) {
  const json written = to_json(s);
  const Scenario again = parse_scenario(written, s.source);
  EXPECT_TRUE(again == s) << written.dump(2);
  EXPECT_EQ(to_json(again), written);
}

TEST(ScenarioRoundTrip, EveryModelPreset) {
  for (const std::string& name : model_preset_names()) {
    SCOPED_TRACE(name);
    const Scenario s = parse_scenario(preset_scenario_on(name, "H100-SXM-80GB"), "s.json");
    EXPECT_TRUE(s.model == *model_preset(name));
    expect_round_trip(s);
  }
}

TEST(ScenarioRoundTrip, EveryGpuPreset) {
  for (const std::string& name : gpu_preset_names()) {
    SCOPED_TRACE(name);
    const Scenario s = parse_scenario(preset_scenario_on("llama2-7b", name), "s.json");
    EXPECT_TRUE(s.cluster.node_groups[0].gpu == *gpu_preset(name));
    EXPECT_TRUE(s.cluster.node_groups[0].intra_node == default_intra_node(*gpu_preset(name)));
    expect_round_trip(s);
  }
}

TEST(ScenarioRoundTrip, EverythingSet) {
  const json d = json::parse(R"({
    "name": "mixed",
    "model": {"preset": "Mixtral-8x7B", "num_layers": 4, "attention_backend": "unfused", "hidden_dropout": 0.05,
              "moe": {"top_k": 1, "layer_freq": 2, "routing_imbalance": 1.3}},
    "training": {"seq_length": 16384, "global_batch_size": 64, "precision": "fp16", "optimizer": "sgd",
                 "seq_length_buckets": [{"max": 4096, "fraction": 0.7}, {"max": 16384, "fraction": 0.3}]},
    "cluster": {"nodes": [{"count": 2, "gpu": "h100-sxm-80gb", "gpus_per_node": 8,
                           "nics": {"count": 8, "bandwidth_Gbps": 400, "latency_us": 3}},
                          {"count": 1, "gpu": {"preset": "A100-SXM-80GB", "memory_GiB": 70}, "gpus_per_node": 4,
                           "intra_node": {"kind": "pcie"}, "nics": {"count": 2, "bandwidth_Gbps": 200}}],
                "network": {"topology": "fat-tree", "oversubscription": 2}},
    "search": {"tensor_model_parallel_size": [1, 2], "schedule": ["gpipe", "double-strand"],
               "sequence_parallel": [true, false], "zero_stage": [3], "recompute": ["full"]},
    "strategy": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, "sequence_parallel": true,
                 "num_micro_batches": 16, "zero_stage": 1, "recompute": "selective", "schedule": "interleaved-1f1b",
                 "virtual_pipeline_model_parallel_size": 2},
    "profile": "my_profile.json"
  })");
  const Scenario s = parse_scenario(d, "s.json");
  EXPECT_EQ(s.model.name, "mixtral-8x7b");
  EXPECT_EQ(s.model.num_layers, 4);
  EXPECT_EQ(s.model.hidden_size, 4096);  // from the preset
  EXPECT_EQ(s.model.moe.num_experts, 8);
  EXPECT_EQ(s.model.moe.top_k, 1);
  EXPECT_EQ(s.model.moe.ffn_hidden_size, 14336);
  EXPECT_EQ(s.model.attention_backend, AttentionBackend::unfused);
  EXPECT_EQ(s.training.seq_length_buckets.size(), 2u);
  EXPECT_EQ(s.cluster.total_gpus(), 20);
  EXPECT_DOUBLE_EQ(s.cluster.node_groups[1].gpu.memory_GiB, 70);
  EXPECT_EQ(s.cluster.node_groups[1].gpu.name, "A100-SXM-80GB");
  EXPECT_EQ(s.cluster.node_groups[1].intra_node.kind, IntraNodeKind::pcie);
  EXPECT_DOUBLE_EQ(s.cluster.node_groups[1].intra_node.bandwidth_GBps, 32);
  EXPECT_DOUBLE_EQ(s.cluster.node_groups[1].intra_node.latency_us, 5);
  EXPECT_EQ(s.search.schedule, (std::vector<Schedule>{Schedule::gpipe, Schedule::double_strand}));
  EXPECT_EQ(s.search.pipeline_model_parallel_size, SearchSpace{}.pipeline_model_parallel_size);
  ASSERT_TRUE(s.strategy.has_value());
  EXPECT_EQ(s.strategy->schedule, Schedule::interleaved_1f1b);
  EXPECT_EQ(s.strategy->num_micro_batches, 16);  // as given: 64 sequences do not split over DP 5, nothing to derive
  EXPECT_EQ(s.strategy->data_parallel_size, 5);   // derived: 20 GPUs / (TP 2 x PP 2)
  EXPECT_EQ(s.profile, "my_profile.json");
  expect_round_trip(s);
}

TEST(ScenarioParse, ExplicitModelWithoutPreset) {
  const json d = json::parse(R"({
    "model": {"num_layers": 2, "hidden_size": 1024, "ffn_hidden_size": 4096, "num_attention_heads": 16,
              "vocab_size": 50000, "activation": "gelu", "normalization": "layernorm",
              "position_embedding_rope": false},
    "training": {"seq_length": 1024, "global_batch_size": 8},
    "cluster": {"nodes": [{"count": 1, "gpu": "RTX-4090", "gpus_per_node": 2}]}
  })");
  const Scenario s = parse_scenario(d, "s.json");
  EXPECT_EQ(s.model.name, "custom");
  EXPECT_EQ(s.model.num_query_groups, 16);
  EXPECT_EQ(s.model.kv_channels, 64);
  EXPECT_EQ(s.model.max_position_embeddings, 1024);  // from seq_length
  EXPECT_FALSE(s.model.is_moe());
  EXPECT_FALSE(s.strategy.has_value());
  EXPECT_EQ(s.profile, "builtin");
  EXPECT_EQ(s.cluster.node_groups[0].nics.count, 0);
  expect_round_trip(s);
}

TEST(ScenarioParse, PresetOverridesAndNullMoe) {
  json d = preset_scenario_on("mixtral-8x7b", "H200-141GB");
  d["model"]["moe"] = nullptr;
  d["model"]["num_attention_heads"] = 16;
  d["strategy"] = nullptr;
  const Scenario s = parse_scenario(d, "s.json");
  EXPECT_FALSE(s.model.is_moe());
  EXPECT_EQ(s.model.num_attention_heads, 16);
  EXPECT_EQ(s.model.num_query_groups, 8);  // GQA kept from the preset
  EXPECT_EQ(s.model.kv_channels, 256);
  EXPECT_FALSE(s.strategy.has_value());
  expect_round_trip(s);
}

TEST(ScenarioParse, StrategyToJsonHasEveryField) {
  Strategy s;
  s.data_parallel_size = 4;
  const json j = to_json(s);
  EXPECT_EQ(j.size(), 12u);
  EXPECT_EQ(j["data_parallel_size"], 4);
  EXPECT_EQ(j["schedule"], "1f1b");
}

}  // namespace
}  // namespace twin

namespace twin {
namespace {

// Every example scenario users start from parses and survives the round trip.
TEST(ShippedScenarios, ParseAndRoundTrip) {
  const std::filesystem::path folder = std::filesystem::path(TWIN_SOURCE_DIR) / "scenarios";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    const Scenario s = load_scenario(file);
    EXPECT_EQ(s.source, file.string());
    expect_round_trip(s);
  }
}

}  // namespace
}  // namespace twin
