// The learning-rate schedule (Megatron's OptimizerParamScheduler.get_lr) and the recipe's keys.
#include "core/training_recipe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/json_reader.hpp"

namespace twin {

double learning_rate_at(const TrainingRecipe& r, std::int64_t iteration, std::int64_t train_iters) {
  if (r.lr_warmup_iters > 0 && iteration <= r.lr_warmup_iters)
    return r.lr * static_cast<double>(iteration) / static_cast<double>(r.lr_warmup_iters);
  const std::int64_t decay_iters = r.lr_decay_iters.value_or(train_iters);
  double coefficient = 1;
  switch (r.lr_decay_style) {
    case LrDecayStyle::constant: return r.lr;
    case LrDecayStyle::linear:
    case LrDecayStyle::cosine: {
      if (iteration > decay_iters) return r.min_lr;
      // decay_iters > lr_warmup_iters: recipe_error for a given one; the run's iterations are past the warm-up
      // here.
      const double ratio = static_cast<double>(iteration - r.lr_warmup_iters) /
                           static_cast<double>(std::max<std::int64_t>(1, decay_iters - r.lr_warmup_iters));
      coefficient = r.lr_decay_style == LrDecayStyle::linear ? 1 - ratio
                                                             : 0.5 * (std::cos(std::numbers::pi * ratio) + 1);
      break;
    }
  }
  return r.min_lr + coefficient * (r.lr - r.min_lr);
}

TrainingRecipe with_flags(TrainingRecipe recipe, const TrainingRecipeFlags& flags) {
  recipe.lr = flags.lr.value_or(recipe.lr);
  recipe.min_lr = flags.min_lr.value_or(recipe.min_lr);
  recipe.clip_grad = flags.clip_grad.value_or(recipe.clip_grad);
  recipe.lr_warmup_iters = flags.lr_warmup_iters.value_or(recipe.lr_warmup_iters);
  if (flags.lr_decay_iters) recipe.lr_decay_iters = flags.lr_decay_iters;
  recipe.lr_decay_style = flags.lr_decay_style.value_or(recipe.lr_decay_style);
  return recipe;
}

std::optional<std::string> recipe_error(const TrainingRecipe& r) {
  if (r.min_lr > r.lr) return fmt::format("expected min_lr at most lr {:g}, got {:g}", r.lr, r.min_lr);
  if (r.lr_decay_iters && r.lr_decay_style != LrDecayStyle::constant && *r.lr_decay_iters <= r.lr_warmup_iters)
    return fmt::format("expected lr_decay_iters above lr_warmup_iters {}, got {}", r.lr_warmup_iters,
                       *r.lr_decay_iters);
  return std::nullopt;
}

TrainingRecipe parse_training_recipe(const JsonReader& training) {
  constexpr std::int64_t kMaxIters = std::int64_t{1} << 40;
  TrainingRecipe r;
  if (auto f = training.find("lr")) r.lr = f->number(0, 1, "expected a learning rate in [0, 1]");
  if (auto f = training.find("min_lr")) r.min_lr = f->number(0, 1, "expected a learning rate in [0, 1]");
  if (auto f = training.find("lr_warmup_iters")) r.lr_warmup_iters = f->integer(0, kMaxIters);
  if (auto f = training.find("lr_decay_iters")) r.lr_decay_iters = f->integer(1, kMaxIters);
  if (auto f = training.find("lr_decay_style"))
    r.lr_decay_style = *lr_decay_style_from_string(f->one_of(lr_decay_style_names(), "learning-rate decay style"));
  if (auto f = training.find("clip_grad")) r.clip_grad = f->number(0, 1e30, "expected a norm >= 0 (0: no clipping)");
  if (const auto error = recipe_error(r))
    training.required(r.min_lr > r.lr ? "min_lr" : "lr_decay_iters").fail_plain(*error);
  return r;
}

std::string to_string(LrDecayStyle style) {
  switch (style) {
    case LrDecayStyle::constant: return "constant";
    case LrDecayStyle::linear: return "linear";
    case LrDecayStyle::cosine: return "cosine";
  }
  return "constant";
}

std::optional<LrDecayStyle> lr_decay_style_from_string(std::string_view name) {
  for (LrDecayStyle style : {LrDecayStyle::constant, LrDecayStyle::linear, LrDecayStyle::cosine})
    if (name == to_string(style)) return style;
  return std::nullopt;
}

std::vector<std::string> lr_decay_style_names() { return {"constant", "linear", "cosine"}; }

}  // namespace twin
