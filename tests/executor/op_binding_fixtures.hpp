// Lowerings the op-binding tests read: a strategy completed and lowered on a small Llama-shaped model, the MoE
// model on a number of GPUs, and a class's actions counted.
#pragma once
#include <map>
#include <stdexcept>

#include "executor/op_binding.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec::testing_binding {

inline IterationGraph lower(Strategy strategy,
                            Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16)) {
  if (auto reason = complete_strategy(scenario, strategy)) throw std::runtime_error(*reason);
  return lower_to_op_graphs(scenario, strategy);
}

// The MoE model on `gpus` GPUs of one node (so that the data group, and the experts' with it, can be 1).
inline Scenario moe_on(int gpus) {
  Scenario scenario = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);
  scenario.cluster.node_groups[0].gpus_per_node = gpus;
  return scenario;
}

// The small Llama-shaped model with its linears in FP8 (hybrid format) under `recipe`.
inline Scenario fp8_scenario(Fp8Recipe recipe) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
  scenario.training.fp8 = Fp8Config{Fp8Format::hybrid, recipe};
  return scenario;
}

inline std::map<Action, int> count_actions(const RankClass& rc) {
  std::map<Action, int> counts;
  for (const OpBinding& b : bind_ops(rc)) ++counts[b.action];
  return counts;
}

}  // namespace twin::exec::testing_binding
