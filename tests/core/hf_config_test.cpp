// Models from a Hugging Face config.json: the public Llama-2-7b, Meta-Llama-3-8B and Mixtral-8x7B configs give
// exactly the shipped presets' models; GPT-2's maps to a GPT; scenario keys override; every bad input names
// its file and JSON path.
#include "core/hf_config.hpp"

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/scenario.hpp"
#include "tests/core/hf_fixtures.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path& kFixtures = testing::kHfFixtures;

ModelConfig from_fixture(const std::string& file) {
  return model_from_hf_config(testing::hf_fixture(file), (kFixtures / file).string());
}

// The preset's numbers; the name is the config's, not the preset's.
void expect_preset(ModelConfig model, const std::string& preset) {
  ModelConfig expected = *model_preset(preset);
  model.name = expected.name;
  EXPECT_EQ(model, expected) << preset;
  EXPECT_EQ(parameter_count(model), parameter_count(expected));
}

TEST(HfConfig, PublicConfigsGiveThePresetsModels) {
  ModelConfig llama2 = from_fixture("llama-2-7b-config.json");
  EXPECT_EQ(llama2.name, "meta-llama/Llama-2-7b-hf");  // the config's _name_or_path
  expect_preset(llama2, "llama2-7b");
  expect_preset(from_fixture("llama-3-8b-config.json"), "llama3-8b");
  ModelConfig mixtral = from_fixture("mixtral-8x7b-config.json");
  EXPECT_EQ(mixtral.moe.num_experts, 8);
  EXPECT_EQ(mixtral.moe.top_k, 2);
  expect_preset(mixtral, "mixtral-8x7b");
}

TEST(HfConfig, Gpt2IsAGptWithTiedEmbeddingsAndLearnedPositions) {
  ModelConfig m = from_fixture("gpt2-config.json");
  EXPECT_EQ(m.num_layers, 12);
  EXPECT_EQ(m.hidden_size, 768);
  EXPECT_EQ(m.ffn_hidden_size, 4 * 768);  // n_inner absent
  EXPECT_EQ(m.num_attention_heads, 12);
  EXPECT_EQ(m.num_query_groups, 12);
  EXPECT_EQ(m.kv_channels, 64);
  EXPECT_EQ(m.vocab_size, 50257);
  EXPECT_EQ(m.max_position_embeddings, 1024);
  EXPECT_EQ(m.activation, Activation::gelu);
  EXPECT_EQ(m.normalization, Normalization::layernorm);
  EXPECT_FALSE(m.position_embedding_rope);
  EXPECT_FALSE(m.untie_embeddings_and_output_weights);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.1);
  // 124M parameters, as GPT-2 small is known by: 124,439,808 with tied embeddings and its biases.
  EXPECT_EQ(parameter_count(m), 124439808);
}

TEST(HfConfig, GptNeoXAndQwen2AndHeadDim) {
  ModelConfig neox = model_from_hf_config(json::parse(R"({
    "architectures": ["GPTNeoXForCausalLM"], "num_hidden_layers": 32, "hidden_size": 4096,
    "intermediate_size": 16384, "num_attention_heads": 32, "vocab_size": 50432,
    "max_position_embeddings": 2048, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "rotary_pct": 0.25,
    "tie_word_embeddings": false })"), "neox.json");
  EXPECT_EQ(neox.activation, Activation::gelu);
  EXPECT_EQ(neox.normalization, Normalization::layernorm);
  EXPECT_TRUE(neox.position_embedding_rope);
  EXPECT_TRUE(neox.add_bias_linear);
  EXPECT_TRUE(neox.untie_embeddings_and_output_weights);
  EXPECT_EQ(neox.name, "neox.json");  // no _name_or_path: the file

  // model_type when "architectures" is absent; head_dim wider than hidden / heads; tied embeddings.
  ModelConfig qwen = model_from_hf_config(json::parse(R"({
    "model_type": "qwen2", "num_hidden_layers": 24, "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 32768, "hidden_act": "silu", "rms_norm_eps": 1e-06,
    "tie_word_embeddings": true })"), "qwen.json");
  EXPECT_EQ(qwen.kv_channels, 128);
  EXPECT_EQ(qwen.num_query_groups, 2);
  EXPECT_FALSE(qwen.untie_embeddings_and_output_weights);
  EXPECT_EQ(qwen.activation, Activation::swiglu);
  EXPECT_EQ(qwen.normalization, Normalization::rmsnorm);
  EXPECT_FALSE(qwen.add_bias_linear);
}

struct HfConfigFolder {
  fs::path path = fs::temp_directory_path() / ("twin-hf-config-" + std::to_string(::getpid()));
  HfConfigFolder() {
    fs::remove_all(path);
    fs::create_directories(path / "models" / "llama3");
  }
  ~HfConfigFolder() { fs::remove_all(path); }
  void write(const fs::path& relative, const std::string& text) const { std::ofstream(path / relative) << text; }
};

json scenario_with_model(json model) {
  return {{"model", std::move(model)},
          {"training", {{"seq_length", 4096}, {"global_batch_size", 64}}},
          {"cluster", {{"nodes", {{{"count", 1}, {"gpu", "H100-SXM-80GB"}, {"gpus_per_node", 8}}}}}}};
}

TEST(HfConfig, ScenarioPathIsRelativeToItsFolderAndItsKeysOverride) {
  HfConfigFolder folder;
  fs::copy_file(kFixtures / "llama-3-8b-config.json", folder.path / "models/llama3/config.json");
  const std::string source = (folder.path / "scenario.json").string();
  Scenario s = parse_scenario(
      scenario_with_model(
          {{"hf_config", "models/llama3/config.json"}, {"num_layers", 4}, {"attention_backend", "fused"}}),
      source);
  ModelConfig expected = *model_preset("llama3-8b");
  expected.name = s.model.name;
  expected.num_layers = 4;
  expected.attention_backend = AttentionBackend::fused;
  EXPECT_EQ(s.model, expected);
  // The resolved scenario (best.json) carries the fields, not the file: it reads back without it.
  EXPECT_EQ(parse_scenario(to_json(s), "best.json").model, s.model);

  // An absolute path works from anywhere.
  Scenario absolute =
      parse_scenario(scenario_with_model({{"hf_config", (kFixtures / "mixtral-8x7b-config.json").string()}}),
                     "elsewhere/scenario.json");
  EXPECT_EQ(absolute.model.moe.num_experts, 8);
}

// The error's file, JSON path and a part of its expectation.
void expect_config_error(const json& config, const std::string& path, const std::string& words) {
  try {
    model_from_hf_config(config, "cfg/config.json");
    ADD_FAILURE() << "no error for " << config.dump();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cfg/config.json") << e.what();
    EXPECT_EQ(e.json_path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

json llama_config() {
  return json::parse(read_input_file(kFixtures / "llama-2-7b-config.json", "a fixture"));
}

TEST(HfConfig, BadConfigsNameTheFileAndPath) {
  json unknown = llama_config();
  unknown["architectures"] = {"BertForMaskedLM"};
  expect_config_error(unknown, "/architectures/0", "architecture \"BertForMaskedLM\" is not one twin maps");
  expect_config_error(unknown, "/architectures/0", "LlamaForCausalLM, MistralForCausalLM");

  json no_type = llama_config();
  no_type.erase("architectures");
  no_type.erase("model_type");
  expect_config_error(no_type, "", "missing key 'architectures' (or 'model_type')");

  json unknown_type = no_type;
  unknown_type["model_type"] = "t5";
  expect_config_error(unknown_type, "/model_type", "model_type \"t5\" is not one twin maps");

  json missing = llama_config();
  missing.erase("num_hidden_layers");
  expect_config_error(missing, "", "num_hidden_layers");

  json gelu = llama_config();
  gelu["hidden_act"] = "gelu";
  expect_config_error(gelu, "/hidden_act", "expected \"silu\"");

  json groups = llama_config();
  groups["num_key_value_heads"] = 5;
  expect_config_error(groups, "/num_key_value_heads", "expected a divisor of num_attention_heads 32");

  json text_size = llama_config();
  text_size["hidden_size"] = "4096";
  expect_config_error(text_size, "/hidden_size", "integer");

  json moe = json::parse(read_input_file(kFixtures / "mixtral-8x7b-config.json", "a fixture"));
  moe["num_experts_per_tok"] = 9;
  expect_config_error(moe, "/num_experts_per_tok", "");

  json relu = json::parse(read_input_file(kFixtures / "gpt2-config.json", "a fixture"));
  relu["activation_function"] = "relu";
  expect_config_error(relu, "/activation_function", "expected a GeLU activation");

  expect_config_error(json::array({1}), "", "object");
}

TEST(HfConfig, BadFilesAndKeysInTheScenario) {
  HfConfigFolder folder;
  const std::string source = (folder.path / "scenario.json").string();
  auto error_of = [&](const json& model) -> InputError {
    try {
      parse_scenario(scenario_with_model(model), source);
    } catch (const InputError& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << model.dump();
    return InputError("", "", "");
  };

  // A missing file is named where the scenario points to it, with the path it looked at.
  InputError missing = error_of({{"hf_config", "nowhere/config.json"}});
  EXPECT_EQ(missing.file(), source);
  EXPECT_EQ(missing.json_path(), "/model/hf_config");
  EXPECT_NE(std::string(missing.what()).find((folder.path / "nowhere/config.json").string()), std::string::npos)
      << missing.what();

  // A folder is not a config file.
  EXPECT_EQ(error_of({{"hf_config", "models"}}).json_path(), "/model/hf_config");

  // A key given twice in the config names the config file and the key's path.
  folder.write("dup.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "hidden_size": 8})");
  InputError duplicate = error_of({{"hf_config", "dup.json"}});
  EXPECT_EQ(duplicate.file(), (folder.path / "dup.json").string());
  EXPECT_EQ(duplicate.json_path(), "/hidden_size") << duplicate.what();

  // A mapping error names the config file, not the scenario.
  folder.write("short.json", R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096})");
  InputError short_config = error_of({{"hf_config", "short.json"}});
  EXPECT_EQ(short_config.file(), (folder.path / "short.json").string());
  EXPECT_NE(std::string(short_config.what()).find("num_hidden_layers"), std::string::npos) << short_config.what();

  InputError both = error_of({{"hf_config", "short.json"}, {"preset", "llama2-7b"}});
  EXPECT_EQ(both.json_path(), "/model/hf_config");
  EXPECT_NE(std::string(both.what()).find("either \"preset\" or \"hf_config\", not both"), std::string::npos);

  EXPECT_EQ(error_of({{"hf_config", 7}}).json_path(), "/model/hf_config");
}

}  // namespace
}  // namespace twin
