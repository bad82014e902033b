// How a rank trains, beside its plan: the recipe, the run's length, the seed, the attention implementation and the
// NCCL timeout that `twin execute`'s command line sets.
#pragma once
#include <cstdint>

#include "core/attention_implementation.hpp"
#include "core/training_recipe.hpp"

namespace twin::exec {

struct TrainingOptions {
  TrainingRecipe recipe;           // the learning-rate schedule and clipping (core/training_recipe.hpp)
  std::int64_t train_iters = 1;    // the run's iterations: where a schedule without lr_decay_iters ends
  std::uint64_t seed = 1234;
  double nccl_timeout_s = 300;  // an iteration that does not finish by then is a hang
  AttentionImplementation attention = kDefaultAttentionImplementation;
};

}  // namespace twin::exec
