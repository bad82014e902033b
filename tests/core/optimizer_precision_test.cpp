// training.main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype and store_param_remainders: parsed with Megatron's
// choices, refused where they mean nothing (fp32 training's master copy, SGD's second moment, remainders of a master
// copy that is not fp32 over bf16 parameters), written back only when set.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "tests/core/scenario_fixtures.hpp"

namespace twin {
namespace {

using nlohmann::json;

using testing::scenario_with_training;

std::string precision_error_path(const json& document) {
  try {
    parse_scenario(document, "scenario.json");
  } catch (const InputError& e) {
    return e.json_path();
  }
  return "";
}

TEST(OptimizerPrecision, DefaultsToFp32AndParsesEachKey) {
  EXPECT_TRUE(parse_scenario(scenario_with_training({}), "s.json").training.optimizer_precision.is_default());
  const Scenario s = parse_scenario(
      scenario_with_training({{"main_params_dtype", "bf16"}, {"exp_avg_dtype", "bf16"}, {"exp_avg_sq_dtype", "fp8"}}),
      "s.json");
  EXPECT_EQ(s.training.optimizer_precision,
            (OptimizerPrecision{StateDtype::bf16, StateDtype::bf16, StateDtype::fp8}));
}

TEST(OptimizerPrecision, BadValuesNameTheirPath) {
  EXPECT_EQ(precision_error_path(scenario_with_training({{"exp_avg_dtype", "fp64"}})), "/training/exp_avg_dtype");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"main_params_dtype", "fp8"}})),
            "/training/main_params_dtype");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"exp_avg_sq_dtype", 16}})), "/training/exp_avg_sq_dtype");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"precision", "fp32"}, {"main_params_dtype", "bf16"}})),
            "/training/main_params_dtype");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"optimizer", "sgd"}, {"exp_avg_sq_dtype", "bf16"}})),
            "/training/exp_avg_sq_dtype");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"optimizer", "sgd"}, {"exp_avg_dtype", "bf16"}})), "");
}

TEST(OptimizerPrecision, RemaindersCompleteBf16ParametersToAnFp32MasterCopyOfTwoBytes) {
  const Scenario s = parse_scenario(scenario_with_training({{"store_param_remainders", true}}), "s.json");
  EXPECT_TRUE(s.training.optimizer_precision.store_param_remainders);
  EXPECT_EQ(master_bytes(s.training.optimizer_precision), 2);
  EXPECT_EQ(master_bytes(OptimizerPrecision{}), 4);
  EXPECT_EQ(to_string(s.training.optimizer_precision), "main_params fp32 as 16-bit remainders, exp_avg fp32, exp_avg_sq fp32");
  const json written = to_json(s);
  EXPECT_EQ(written["training"]["store_param_remainders"], true);
  EXPECT_EQ(parse_scenario(written, "s.json").training.optimizer_precision, s.training.optimizer_precision);
  EXPECT_FALSE(
      to_json(parse_scenario(scenario_with_training({{"exp_avg_dtype", "bf16"}}), "s.json"))["training"].contains(
          "store_param_remainders"));
  EXPECT_EQ(precision_error_path(scenario_with_training({{"store_param_remainders", "yes"}})),
            "/training/store_param_remainders");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"store_param_remainders", true}, {"precision", "fp16"}})),
            "/training/store_param_remainders");
  EXPECT_EQ(
      precision_error_path(scenario_with_training({{"store_param_remainders", true}, {"main_params_dtype", "bf16"}})),
      "/training/store_param_remainders");
  EXPECT_EQ(precision_error_path(scenario_with_training({{"store_param_remainders", false}, {"precision", "fp16"}})),
            "");
}

TEST(OptimizerPrecision, WrittenBackOnlyWhenSet) {
  const Scenario plain = parse_scenario(scenario_with_training({}), "s.json");
  EXPECT_FALSE(to_json(plain)["training"].contains("exp_avg_dtype"));
  const Scenario narrow = parse_scenario(scenario_with_training({{"exp_avg_dtype", "bf16"}}), "s.json");
  const json written = to_json(narrow);
  EXPECT_EQ(written["training"]["exp_avg_dtype"], "bf16");
  EXPECT_EQ(written["training"]["main_params_dtype"], "fp32");
  EXPECT_EQ(parse_scenario(written, "s.json").training.optimizer_precision, narrow.training.optimizer_precision);
}

}  // namespace
}  // namespace twin
