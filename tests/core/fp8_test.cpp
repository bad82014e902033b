// training.fp8 (core/fp8.hpp): Megatron's names and defaults, the checks Megatron makes and those twin adds (an FP8
// GPU, MXFP8 on Blackwell, no plan family), the layers kept in BF16, and the section written back only when set.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fp8.hpp"
#include "core/scenario.hpp"
#include "tests/core/scenario_fixtures.hpp"

namespace twin {
namespace {

using nlohmann::json;

json scenario_with_fp8(const json& fp8, const char* gpu = "H100-SXM-80GB") {
  json s = testing::scenario_with_training(fp8.is_null() ? json::object() : json{{"fp8", fp8}});
  s["cluster"]["nodes"][0]["gpu"] = gpu;
  return s;
}

TEST(Fp8, AbsentMeansNoneAndDefaultsAreMegatrons) {
  EXPECT_FALSE(parse_scenario(scenario_with_fp8(nullptr), "s.json").training.fp8);
  const Scenario s = parse_scenario(scenario_with_fp8({{"format", "e4m3"}}), "s.json");
  ASSERT_TRUE(s.training.fp8);
  EXPECT_EQ(*s.training.fp8, (Fp8Config{Fp8Format::e4m3, Fp8Recipe::delayed, false, true, 1, false, 1, 1}));
}

TEST(Fp8, RefusalsNameTheirPath) {
  const auto refused_at = [](const json& document, const std::string& path) {
    const std::string error = testing::scenario_error(document);
    EXPECT_EQ(error.rfind(path + ":", 0), 0u) << error;
  };
  refused_at(scenario_with_fp8(json::object()), "/training/fp8");  // format is required
  refused_at(scenario_with_fp8({{"format", "e5m2"}}), "/training/fp8/format");
  refused_at(scenario_with_fp8({{"format", "hybrid"}, {"recipe", "custom"}}), "/training/fp8/recipe");
  refused_at(scenario_with_fp8({{"format", "hybrid"}, {"first_last_layers_bf16", true}}),  // delayed: Megatron refuses
             "/training/fp8/first_last_layers_bf16");
  refused_at(scenario_with_fp8({{"format", "hybrid"}, {"recipe", "tensorwise"}, {"amax_history_len", 16}}),
             "/training/fp8/amax_history_len");
  refused_at(scenario_with_fp8({{"format", "hybrid"}, {"recipe", "tensorwise"}, {"num_layers_at_start_in_bf16", 2}}),
             "/training/fp8/num_layers_at_start_in_bf16");
  refused_at(scenario_with_fp8({{"format", "hybrid"}}, "A100-SXM-80GB"), "/cluster/nodes/0/gpu");
  refused_at(scenario_with_fp8({{"format", "hybrid"}, {"recipe", "mxfp8"}}), "/cluster/nodes/0/gpu");
  refused_at(scenario_with_fp8({{"format", "hybrid"},
                                {"recipe", "tensorwise"},
                                {"first_last_layers_bf16", true},
                                {"num_layers_at_start_in_bf16", 20},
                                {"num_layers_at_end_in_bf16", 20}}),
             "/training/fp8");
  json fp32 = scenario_with_fp8({{"format", "hybrid"}});
  fp32["training"]["precision"] = "fp32";
  refused_at(fp32, "/training/fp8");
  json per_layer = scenario_with_fp8({{"format", "hybrid"}});
  per_layer["search"] = {{"per_layer", true}};
  refused_at(per_layer, "/training/fp8");
  EXPECT_EQ(testing::scenario_error(scenario_with_fp8({{"format", "hybrid"}, {"recipe", "mxfp8"}}, "B200")), "");
}

TEST(Fp8, FirstAndLastLayersKeptInBf16) {
  Fp8Config fp8;
  EXPECT_TRUE(layer_runs_fp8(fp8, 0, 32));
  fp8.first_last_layers_bf16 = true;
  fp8.num_layers_at_end_in_bf16 = 2;
  EXPECT_FALSE(layer_runs_fp8(fp8, 0, 32));
  EXPECT_TRUE(layer_runs_fp8(fp8, 1, 32));
  EXPECT_TRUE(layer_runs_fp8(fp8, 29, 32));
  EXPECT_FALSE(layer_runs_fp8(fp8, 30, 32));
  EXPECT_FALSE(layer_runs_fp8(fp8, 31, 32));
}

TEST(Fp8, WrittenBackOnlyWhenSet) {
  EXPECT_FALSE(to_json(parse_scenario(scenario_with_fp8(nullptr), "s.json"))["training"].contains("fp8"));
  const Scenario s = parse_scenario(scenario_with_fp8({{"format", "hybrid"},
                                                       {"recipe", "tensorwise"},
                                                       {"wgrad", false},
                                                       {"first_last_layers_bf16", true},
                                                       {"num_layers_at_end_in_bf16", 3}}),
                                    "s.json");
  EXPECT_EQ(parse_scenario(to_json(s), "s.json"), s);
}

TEST(Fp8, ScalesPerRecipe) {
  EXPECT_EQ(fp8_scale_bytes(Fp8Recipe::delayed, 4096), 4);
  EXPECT_EQ(fp8_scale_bytes(Fp8Recipe::blockwise, 4096), 128);
  EXPECT_EQ(fp8_scale_bytes(Fp8Recipe::mxfp8, 4096), 128);
}

}  // namespace
}  // namespace twin
