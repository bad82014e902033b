// Every kind of bad scenario input: the error names the file, the JSON path and what was expected.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"

namespace twin {
namespace {

using nlohmann::json;

json valid() {
  return json::parse(R"({
    "name": "t",
    "model": {"preset": "llama2-7b"},
    "training": {"seq_length": 4096, "global_batch_size": 512},
    "cluster": {"nodes": [{"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8}]}
  })");
}

// Parses `document` expecting an InputError at `path` whose message contains every one of `expected`.
void expect_error(const json& document, const std::string& path, std::initializer_list<std::string> expected) {
  try {
    parse_scenario(document, "scenario.json");
    ADD_FAILURE() << "no error for " << document.dump();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.file(), "scenario.json");
    EXPECT_EQ(e.json_path(), path) << message;
    const std::string prefix = path.empty() ? "scenario.json:" : "scenario.json: at " + path + ": ";
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
    for (const std::string& part : expected) EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(ScenarioErrors, ValidBaseParses) { EXPECT_NO_THROW(parse_scenario(valid(), "scenario.json")); }

TEST(ScenarioErrors, MalformedJsonNamesTheByte) {
  try {
    parse_scenario_text("{\n  \"model\": {\"preset\": \"llama2-7b\",}\n}", "scenario.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "");
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("scenario.json:", 0), 0u) << message;
    EXPECT_NE(message.find("malformed JSON (byte 37)"), std::string::npos) << message;
    EXPECT_NE(message.find("line 2"), std::string::npos) << message;
  }
}

TEST(ScenarioErrors, NumberOverflowNamesItsPath) {
  try {
    parse_scenario_text("{\"name\": \"x\", \"model\": {\"num_layers\": [1, 1e400]}}", "scenario.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "/model/num_layers/1");
    EXPECT_NE(std::string(e.what()).find("expected a number within the range of a double, got 1e400"),
              std::string::npos) << e.what();
  }
}

TEST(ScenarioErrors, TopLevelMustBeAnObject) {
  expect_error(json::array({1}), "", {"expected a JSON object at the top level, got an array"});
}

TEST(ScenarioErrors, WrongTypeShowsTheValue) {
  json d = valid();
  d["model"]["num_layers"] = "abc";
  expect_error(d, "/model/num_layers", {"expected a positive integer", "got \"abc\""});
  d = valid();
  d["model"]["num_layers"] = 2.5;
  expect_error(d, "/model/num_layers", {"expected a positive integer", "got 2.5"});
  d = valid();
  d["search"] = {{"sequence_parallel", {1}}};
  expect_error(d, "/search/sequence_parallel/0", {"expected true or false, got 1"});
  d = valid();
  d["model"] = "llama2-7b";
  expect_error(d, "/model", {"expected an object, got \"llama2-7b\""});
}

TEST(ScenarioErrors, UnknownKeySuggestsTheClosest) {
  json d = valid();
  d["model"]["hiden_size"] = 4096;
  expect_error(d, "/model/hiden_size", {"unknown key 'hiden_size' (did you mean 'hidden_size'?)"});
  d = valid();
  d["modle"] = d["model"];
  expect_error(d, "/modle", {"unknown key 'modle' (did you mean 'model'?)"});
  d = valid();
  d["cluster"]["nodes"][0]["xyzzy"] = 1;
  expect_error(d, "/cluster/nodes/0/xyzzy", {"unknown key 'xyzzy'", "expected one of: count, gpu"});
}

TEST(ScenarioErrors, UnknownPresetsListTheValidNames) {
  json d = valid();
  d["model"]["preset"] = "llama2-7";
  expect_error(d, "/model/preset", {"unknown model preset \"llama2-7\"", "did you mean 'llama2-7b'", "mixtral-8x22b"});
  d = valid();
  d["cluster"]["nodes"][0]["gpu"] = "MI300X";
  expect_error(d, "/cluster/nodes/0/gpu", {"unknown GPU \"MI300X\"", "H100-SXM-80GB", "RTX-3080Ti", "GB300"});
  d = valid();
  d["cluster"]["nodes"][0]["intra_node"] = {{"kind", "infiniband"}};
  expect_error(d, "/cluster/nodes/0/intra_node/kind", {"nvswitch, nvlink, pcie", "got \"infiniband\""});
  d = valid();
  d["search"] = {{"schedule", {"1f1b", "zb-v"}}};
  expect_error(d, "/search/schedule/1", {"gpipe, 1f1b, interleaved-1f1b, double-strand"});
}

TEST(ScenarioErrors, MissingRequiredFields) {
  json d = valid();
  d["training"].erase("seq_length");
  expect_error(d, "/training", {"missing required key 'seq_length'"});
  d = valid();
  d["model"] = {{"num_layers", 2}};
  expect_error(d, "/model", {"missing required key 'hidden_size'"});
  d = valid();
  d.erase("cluster");
  expect_error(d, "", {"missing required key 'cluster'"});
  d = valid();
  d["cluster"]["nodes"] = json::array();
  expect_error(d, "/cluster/nodes", {"expected a non-empty array, got an array"});
  d = valid();
  d["cluster"]["nodes"][0]["gpu"] = {{"name", "X"}, {"peak_bf16_tflops", 100}};
  expect_error(d, "/cluster/nodes/0/gpu", {"missing required key 'peak_fp32_tflops'"});
}

TEST(ScenarioErrors, EmptySearchList) {
  json d = valid();
  d["search"] = {{"tensor_model_parallel_size", json::array()}};
  expect_error(d, "/search/tensor_model_parallel_size", {"expected a non-empty array"});
  d["search"] = {{"micro_batch_size", {1, 2, 1}}};
  expect_error(d, "/search/micro_batch_size/2", {"expected distinct values, got 1"});
}

TEST(ScenarioErrors, OutOfRange) {
  json d = valid();
  d["search"] = {{"zero_stage", {0, 4}}};
  expect_error(d, "/search/zero_stage/1", {"expected an integer in [0, 3], got 4"});
  d = valid();
  d["training"]["global_batch_size"] = 0;
  expect_error(d, "/training/global_batch_size", {"expected a positive integer", "got 0"});
  d = valid();
  d["training"]["seq_length_buckets"] = {{{"max", 2048}, {"fraction", 0.7}}, {{"max", 4096}, {"fraction", 0.2}}};
  expect_error(d, "/training/seq_length_buckets", {"expected bucket fractions summing to 1, got 0.9"});
  d["training"]["seq_length_buckets"][1]["fraction"] = 1.5;
  expect_error(d, "/training/seq_length_buckets/1/fraction", {"expected a fraction in [0, 1], got 1.5"});
  d["training"]["seq_length_buckets"] = {{{"max", 4096}, {"fraction", 0.5}}, {{"max", 4096}, {"fraction", 0.5}}};
  expect_error(d, "/training/seq_length_buckets/1/max", {"above the previous bucket's 4096"});
  // As a histogram's lengths: none above seq_length (issue 44).
  d["training"]["seq_length_buckets"] = {{{"max", 2048}, {"fraction", 0.5}}, {{"max", 8192}, {"fraction", 0.5}}};
  expect_error(d, "/training/seq_length_buckets/1/max",
               {"expected a length in [1, training.seq_length 4096], got 8192"});
  d = valid();
  d["model"]["moe"] = {{"num_experts", 8}, {"top_k", 2}, {"routing_imbalance", 0.5}};
  expect_error(d, "/model/moe/routing_imbalance", {"expected a number >= 1"});
  d["model"]["moe"] = {{"num_experts", 2}, {"top_k", 3}};
  expect_error(d, "/model/moe/top_k", {"expected top_k <= num_experts 2, got 3"});
  d = valid();
  d["model"]["num_query_groups"] = 5;
  expect_error(d, "/model/num_query_groups", {"expected a divisor of num_attention_heads 32, got 5"});
  d = valid();
  d["model"]["hidden_dropout"] = 1.0;
  expect_error(d, "/model/hidden_dropout", {"expected a dropout probability in [0, 1)"});
  d = valid();
  d["cluster"]["network"] = {{"oversubscription", 0.5}};
  expect_error(d, "/cluster/network/oversubscription", {"expected an oversubscription ratio in [1, 1000], got 0.5"});
  // Physical quantities orders of magnitude off are refused where they are written (a NIC of 1e-12 Gb/s
  // once made a plan of 0.000 s, and one of 1e-15 overflowed the clock).
  d = valid();
  d["cluster"]["nodes"][0]["nics"] = {{"count", 8}, {"bandwidth_Gbps", 1e-12}};
  expect_error(d, "/cluster/nodes/0/nics/bandwidth_Gbps", {"expected a NIC bandwidth in Gb/s in [1, 1e+06]"});
  d = valid();
  d["cluster"]["nodes"][0]["gpu"] = {{"preset", "H100-SXM-80GB"}, {"peak_bf16_tflops", 1e9}};
  expect_error(d, "/cluster/nodes/0/gpu/peak_bf16_tflops", {"expected a bf16 peak in TFLOP/s in [1, 100000]"});
  d["cluster"]["nodes"][0]["gpu"] = {{"preset", "H100-SXM-80GB"}, {"nvlink_bandwidth_GBps", 0.001}};
  expect_error(d, "/cluster/nodes/0/gpu/nvlink_bandwidth_GBps", {"[1, 1e5], or 0 for none"});
  d = valid();
  d["cluster"]["nodes"][0]["intra_node"] = {{"kind", "nvswitch"}, {"latency_us", 1e7}};
  expect_error(d, "/cluster/nodes/0/intra_node/latency_us", {"expected a latency in microseconds in [0, 10000]"});
  d = valid();
  d["model"]["preset"] = "gpt3-175b";
  expect_error(d, "/training/seq_length", {"expected at most max_position_embeddings 2048", "got 4096"});
}

TEST(ScenarioErrors, MultiNodeNeedsNics) {
  json d = valid();
  d["cluster"]["nodes"][0]["count"] = 2;
  expect_error(d, "/cluster/nodes/0", {"expected \"nics\" with count >= 1"});
  d["cluster"]["nodes"][0]["nics"] = {{"count", 8}};
  expect_error(d, "/cluster/nodes/0/nics", {"missing required key 'bandwidth_Gbps'"});
  d["cluster"]["nodes"][0]["nics"]["bandwidth_Gbps"] = 400;
  EXPECT_NO_THROW(parse_scenario(d, "scenario.json"));
}

TEST(ScenarioErrors, UnimplementedFeaturesAreRejectedClearly) {
  json d = valid();
  d["search"] = {{"per_layer", 1}};  // per-layer plans are searched (strategies/per_layer/per_layer_search.hpp); the flag is a boolean
  expect_error(d, "/search/per_layer", {"expected true or false"});
  d["search"] = {{"hot_switch", true}};
  expect_error(d, "/search/hot_switch", {"needs a sequence-length distribution"});
  d = valid();
  d["strategy"] = {{"pipelines", json::array()}};
  expect_error(d, "/strategy/pipelines", {"expected a non-empty array"});
}

TEST(ScenarioErrors, UnreadableFileNamesIt) {
  try {
    load_scenario("/nonexistent/dir/scenario.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "/nonexistent/dir/scenario.json");
    EXPECT_NE(std::string(e.what()).find("cannot open"), std::string::npos);
  }
}

TEST(ScenarioErrors, KeysWithSlashesAreEscapedInThePath) {
  json d = valid();
  d["model"]["a/b~c"] = 1;
  expect_error(d, "/model/a~1b~0c", {"unknown key 'a/b~c'"});
}

}  // namespace
}  // namespace twin

namespace twin {
namespace {

TEST(ScenarioErrors, PipelineLayoutIsMegatronsString) {
  json d = valid();
  d["strategy"] = {{"pipeline_model_parallel_size", 2}, {"pipeline_model_parallel_layout", "Et|x|L"}};
  expect_error(d, "/strategy/pipeline_model_parallel_layout",
               {"expected a layout of E, t, m, L, '|', commas, x*n and (...)*n (Megatron-LM's", "not 'x'"});
  d["strategy"]["pipeline_model_parallel_layout"] = "E(t)*99999999|L";
  expect_error(d, "/strategy/pipeline_model_parallel_layout", {"at most 65536 symbols"});
  d["strategy"]["pipeline_model_parallel_layout"] = "Et*15|t*17L";
  const Scenario scenario = parse_scenario(d, "scenario.json");
  ASSERT_TRUE(scenario.strategy);
  EXPECT_EQ(scenario.strategy->pipeline_model_parallel_layout.decoder_layers, (std::vector<int>{15, 17}));
  EXPECT_EQ(to_json(*scenario.strategy)["pipeline_model_parallel_layout"], "Et*15|t*17L");
  EXPECT_EQ(scenario.strategy->key().substr(scenario.strategy->key().rfind('.')), ".layout-15-17");
}

}  // namespace
// quick GeGLU's terms are read by that activation alone (Megatron's rule): beside another they are refused at their key.
TEST(ScenarioErrors, GluTermsNeedQuickGeglu) {
  json doc = valid();
  doc["model"]["activation_func_clamp_value"] = 7;
  expect_error(doc, "/model/activation_func_clamp_value", {"quick_geglu only", "swiglu"});
  doc["model"]["activation"] = "quick_geglu";
  doc["model"]["glu_linear_offset"] = 1;
  const Scenario parsed = parse_scenario(doc, "scenario.json");
  EXPECT_EQ(parsed.model.activation, Activation::quick_geglu);
  EXPECT_EQ(parsed.model.glu_linear_offset, 1);
  EXPECT_EQ(parsed.model.activation_func_clamp_value, 7);
  doc["model"]["activation_func_clamp_value"] = -1;
  expect_error(doc, "/model/activation_func_clamp_value", {"clamp value"});
}

}  // namespace twin
