// The training recipe twin execute runs (scenario training.lr, min_lr, lr_warmup_iters, lr_decay_iters,
// lr_decay_style, clip_grad): the learning rate per iteration and gradient clipping by global norm, with
// Megatron-LM's names and semantics (NVIDIA/Megatron-LM at kMegatronCommit, core/megatron_flags.hpp:
// megatron/core/optimizer_param_scheduler.py OptimizerParamScheduler.get_lr, megatron/core/optimizer/clip_grads.py
// clip_grad_by_total_norm_fp32). No input to the simulation: every plan prices the same norm pass and reduction.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

// --lr-decay-style after the warm-up: constant (max lr), linear or cosine from lr to min_lr at lr_decay_iters.
enum class LrDecayStyle : std::uint8_t { constant, linear, cosine };

struct TrainingRecipe {
  double lr = 3e-4;                 // --lr: the peak (Megatron requires it; twin's default)
  double min_lr = 0;                // --min-lr: the floor of the decay
  std::int64_t lr_warmup_iters = 0;  // --lr-warmup-iters: linear from 0 (Megatron's --lr-warmup-init) to lr
  // --lr-decay-iters: the iteration at which the decay reaches min_lr; absent: the run's iterations (Megatron:
  // --train-iters).
  std::optional<std::int64_t> lr_decay_iters;
  // --lr-decay-style. Megatron's default is linear; twin's is constant, since `twin execute` runs a few dozen
  // iterations to measure the plan, and a decay over them would be no schedule a user trains with.
  LrDecayStyle lr_decay_style = LrDecayStyle::constant;
  double clip_grad = 1.0;  // --clip-grad: the global L2 norm the gradients are scaled down to; 0: no clipping
  bool operator==(const TrainingRecipe&) const = default;
  bool is_default() const { return *this == TrainingRecipe{}; }
};

// A run's flags over a plan's recipe (twin execute --lr, --min-lr, ...): each given one replaces the plan's.
struct TrainingRecipeFlags {
  std::optional<double> lr, min_lr, clip_grad;
  std::optional<std::int64_t> lr_warmup_iters, lr_decay_iters;
  std::optional<LrDecayStyle> lr_decay_style;
};
TrainingRecipe with_flags(TrainingRecipe recipe, const TrainingRecipeFlags& flags);

// The learning rate of 0-based `iteration` of a run of `train_iters`: Megatron's get_lr at num_steps = iteration
// (its scheduler steps after each optimizer step, so the first iteration of a warm-up runs at 0).
double learning_rate_at(const TrainingRecipe& recipe, std::int64_t iteration, std::int64_t train_iters);

// What is wrong with the recipe as a whole ("expected min_lr at most lr ..."), or nothing. Field ranges are the
// reader's.
std::optional<std::string> recipe_error(const TrainingRecipe& recipe);

class JsonReader;
// The recipe's keys of the scenario's training section (`training`; each optional).
TrainingRecipe parse_training_recipe(const JsonReader& training);

std::string to_string(LrDecayStyle style);
std::optional<LrDecayStyle> lr_decay_style_from_string(std::string_view name);
std::vector<std::string> lr_decay_style_names();

}  // namespace twin
