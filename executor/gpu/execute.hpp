// `twin execute`: train a plan's model with the plan's strategy on real GPUs, one process per GPU, and
// write what happened next to what the simulator predicted.
#pragma once
#include <cstdint>
#include <string>

#include "core/attention_implementation.hpp"
#include "core/training_recipe.hpp"

namespace twin::exec {

struct ExecuteRequest {
  std::string plan;              // best.json
  std::string run_dir;           // where the results go (default: the plan's folder)
  int iterations = 20;
  int warmup = 3;                // first iterations left out of the timing (cuBLASLt heuristics, pool growth)
  bool trace = true;             // CUPTI kernel records -> Chrome traces and ops.csv
  TrainingRecipeFlags recipe;    // over the plan's scenario.training recipe
  std::uint64_t seed = 1234;
  double nccl_timeout_s = 300;   // an iteration (or the loss all-reduce) not done by then is a hang
  AttentionImplementation attention = kDefaultAttentionImplementation;
};

// Refuses plans that do not fit or that the executor cannot run (with the reason) before launching.
// Returns the process exit code.
int execute_main(const ExecuteRequest& request);

}  // namespace twin::exec
