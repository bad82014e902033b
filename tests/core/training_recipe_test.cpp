// The training recipe (core/training_recipe.hpp): Megatron's learning-rate schedule (warm-up from 0, then constant,
// linear or cosine decay to min_lr), its keys in the scenario's training section, written back only when set, and
// a run's flags over a plan's recipe.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "core/training_recipe.hpp"
#include "tests/core/scenario_fixtures.hpp"

namespace twin {
namespace {

using nlohmann::json;

using testing::scenario_with_training;

std::string recipe_error_of(const json& keys) {
  try {
    parse_scenario(scenario_with_training(keys), "scenario.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TrainingRecipe recipe(LrDecayStyle style, std::int64_t warmup, std::optional<std::int64_t> decay_iters) {
  TrainingRecipe r;
  r.lr = 1e-3;
  r.min_lr = 1e-4;
  r.lr_warmup_iters = warmup;
  r.lr_decay_iters = decay_iters;
  r.lr_decay_style = style;
  return r;
}

// Megatron's get_lr: num_steps <= warmup gives lr * num_steps / warmup, so the first iteration runs at 0.
TEST(TrainingRecipe, WarmUpRisesLinearlyFromZeroToThePeak) {
  const TrainingRecipe r = recipe(LrDecayStyle::constant, 4, std::nullopt);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 0, 100), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 1, 100), 2.5e-4);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 4, 100), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 99, 100), 1e-3);  // constant after it, min_lr unused
}

TEST(TrainingRecipe, LinearDecayReachesMinLrAtDecayIters) {
  const TrainingRecipe r = recipe(LrDecayStyle::linear, 2, 12);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 2, 50), 1e-3);
  // ratio (7 - 2) / (12 - 2) = 0.5: halfway from lr to min_lr.
  EXPECT_NEAR(learning_rate_at(r, 7, 50), 1e-4 + 0.5 * 9e-4, 1e-15);
  EXPECT_NEAR(learning_rate_at(r, 12, 50), 1e-4, 1e-15);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 13, 50), 1e-4);  // past decay_iters: min_lr
}

TEST(TrainingRecipe, CosineDecayFollowsHalfACosine) {
  const TrainingRecipe r = recipe(LrDecayStyle::cosine, 0, 8);
  EXPECT_DOUBLE_EQ(learning_rate_at(r, 0, 50), 1e-3);
  EXPECT_NEAR(learning_rate_at(r, 2, 50), 1e-4 + 9e-4 * 0.5 * (std::cos(std::numbers::pi / 4) + 1), 1e-15);
  EXPECT_NEAR(learning_rate_at(r, 4, 50), 5.5e-4, 1e-15);
  EXPECT_NEAR(learning_rate_at(r, 8, 50), 1e-4, 1e-15);
}

// Megatron's lr_decay_iters defaults to --train-iters: twin's to the run's iterations.
TEST(TrainingRecipe, DecayWithoutDecayItersEndsWithTheRun) {
  const TrainingRecipe r = recipe(LrDecayStyle::linear, 0, std::nullopt);
  EXPECT_NEAR(learning_rate_at(r, 10, 20), 1e-4 + 0.5 * 9e-4, 1e-15);
  EXPECT_NEAR(learning_rate_at(r, 10, 40), 1e-4 + 0.75 * 9e-4, 1e-15);
}

TEST(TrainingRecipe, AbsentKeysAreTwinsDefaultAndWriteNothing) {
  const Scenario s = parse_scenario(scenario_with_training(json::object()), "s.json");
  EXPECT_TRUE(s.training.recipe.is_default());
  EXPECT_EQ(s.training.recipe.lr_decay_style, LrDecayStyle::constant);
  EXPECT_DOUBLE_EQ(s.training.recipe.clip_grad, 1.0);
  EXPECT_FALSE(to_json(s).at("training").contains("lr"));
}

TEST(TrainingRecipe, KeysReadAndWrittenBack) {
  const json keys = {{"lr", 3e-4},           {"min_lr", 3e-5},         {"lr_warmup_iters", 4},
                     {"lr_decay_iters", 32}, {"lr_decay_style", "cosine"}, {"clip_grad", 0.5}};
  const Scenario s = parse_scenario(scenario_with_training(keys), "s.json");
  EXPECT_EQ(s.training.recipe.lr_decay_iters, 32);
  EXPECT_EQ(s.training.recipe.lr_decay_style, LrDecayStyle::cosine);
  const json written = to_json(s);
  for (const auto& [key, value] : keys.items()) EXPECT_EQ(written.at("training").at(key), value) << key;
  EXPECT_EQ(parse_scenario(written, "again.json").training.recipe, s.training.recipe);
}

TEST(TrainingRecipe, BadRecipesAreRefusedAtTheirKey) {
  EXPECT_EQ(recipe_error_of({{"lr", 3e-4}, {"min_lr", 1e-3}}),
            "scenario.json: at /training/min_lr: expected min_lr at most lr 0.0003, got 0.001");
  EXPECT_EQ(recipe_error_of({{"lr_warmup_iters", 10}, {"lr_decay_iters", 10}, {"lr_decay_style", "linear"}}),
            "scenario.json: at /training/lr_decay_iters: expected lr_decay_iters above lr_warmup_iters 10, got 10");
  EXPECT_NE(recipe_error_of({{"lr_decay_style", "WSD"}}).find("/training/lr_decay_style"), std::string::npos);
  EXPECT_NE(recipe_error_of({{"clip_grad", -1}}).find("/training/clip_grad"), std::string::npos);
  EXPECT_NE(recipe_error_of({{"lr", "fast"}}).find("/training/lr"), std::string::npos);
}

TEST(TrainingRecipe, FlagsGivenReplaceThePlansOwn) {
  TrainingRecipe plan = recipe(LrDecayStyle::cosine, 4, 100);
  TrainingRecipeFlags flags;
  flags.lr_warmup_iters = 2;
  flags.clip_grad = 0;
  const TrainingRecipe run = with_flags(plan, flags);
  EXPECT_EQ(run.lr_warmup_iters, 2);
  EXPECT_DOUBLE_EQ(run.clip_grad, 0);
  EXPECT_DOUBLE_EQ(run.lr, plan.lr);
  EXPECT_EQ(run.lr_decay_iters, 100);
  EXPECT_EQ(run.lr_decay_style, LrDecayStyle::cosine);
}

}  // namespace
}  // namespace twin
