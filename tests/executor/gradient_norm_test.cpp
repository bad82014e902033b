// Gradient clipping's global norm (executor/parameters.hpp gradient_norm_ranges, summed over the stage's data,
// tensor and pipeline groups by executor/gpu/optimizer_run.cpp): over every rank of a plan, each weight element
// of the model is counted exactly once, as in Megatron-LM's get_grad_norm_fp32 (TP duplicates counted on TP rank
// 0 only, the distributed optimizer's shards summed over DP), whatever TP, PP, DP and ZeRO split the weights.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "executor/parameters.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

struct Split {
  int tp = 1, pp = 1, dp = 1, zero = 0;
  bool tied = false;
};

Scenario scenario_for(const Split& split) {
  ModelConfig model = testing::llama_shaped(4);
  model.untie_embeddings_and_output_weights = !split.tied;
  Scenario s = testing::make_scenario(model, 1, 1024, 16);
  s.cluster.node_groups[0].gpus_per_node = split.tp * split.pp * split.dp;
  return s;
}

// Elements each weight (by name) adds to the squared norm, summed over every rank of the split.
std::map<std::string, std::int64_t> counted_elements(const Split& split) {
  const Scenario scenario = scenario_for(split);
  Strategy s = testing::make_strategy(split.tp, split.pp);
  s.data_parallel_size = split.dp;
  s.zero_stage = split.zero;
  if (auto reason = complete_strategy(scenario, s)) throw std::runtime_error(*reason);
  std::map<std::string, std::int64_t> counted;
  for (int stage = 0; stage < split.pp; ++stage)
    for (int tp = 0; tp < split.tp; ++tp)
      for (int dp = 0; dp < split.dp; ++dp)
        for (const ParameterUnitLayout& unit : plan_parameter_units(scenario, s, RankPlacement{tp, dp, stage}, 7))
          for (const ElementRange& range : gradient_norm_ranges(unit, tp == 0))
            for (const WeightTensor& w : unit.tensors) {
              const std::int64_t lo = std::max(range.begin, w.offset);
              const std::int64_t hi = std::min(range.begin + range.count, w.offset + w.elements());
              if (hi > lo) counted[w.name] += hi - lo;
            }
  return counted;
}

TEST(GradientNorm, EveryRankTogetherCountsEachWeightElementOnce) {
  const std::map<std::string, std::int64_t> single = counted_elements(Split{});
  ASSERT_GT(single.size(), 10u);
  for (const Split& split : {Split{2, 1, 1, 0}, Split{1, 1, 2, 0}, Split{2, 2, 2, 0}, Split{2, 2, 2, 1},
                             Split{2, 1, 2, 3}, Split{1, 2, 2, 2}, Split{2, 2, 1, 0, true}, Split{1, 2, 2, 1, true}}) {
    const std::map<std::string, std::int64_t> expected =
        split.tied ? counted_elements(Split{1, 1, 1, 0, true}) : single;
    EXPECT_EQ(counted_elements(split), expected)
        << "tp " << split.tp << " pp " << split.pp << " dp " << split.dp << " zero " << split.zero
        << (split.tied ? " tied" : "");
  }
}

}  // namespace
}  // namespace twin::exec
