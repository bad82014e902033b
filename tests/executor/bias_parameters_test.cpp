// Linear biases of MoE models in the executor's parameter layout (gpt-oss; Megatron's add_bias_linear): the router's
// and each expert's.
#include <gtest/gtest.h>

#include "executor/parameters.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

// With add_bias_linear (gpt-oss) the router has a bias [experts] (replicated over TP as its weight, drawn as it is,
// Megatron's TopKRouter) and each experts GEMM a stack of the rank's experts' biases [experts, out] after its
// weights' (zeros); plan_parameter_units holds the sums to the memory model's count, so a count that left any out
// would throw. Under EP 2 a rank's bias rows start at its first expert.
TEST(Parameters, BiasedExpertsHoldTheirBiasStacksAndTheRoutersBias) {
  ModelConfig m = testing::moe_shaped();
  m.add_bias_linear = true;
  Scenario moe = testing::make_scenario(m, 1, 1024, 16);
  for (const int ep : {1, 2}) {
    Strategy s = testing::make_strategy(1, 1, 1, false);
    s.expert_model_parallel_size = ep;
    ASSERT_FALSE(complete_strategy(moe, s).has_value());
    const RankPlacement placement = placement_of(s, ep - 1);  // the last EP rank of the first group
    const std::int64_t local = m.moe.num_experts / ep;
    int expert_units = 0, routers = 0;
    for (const ParameterUnitLayout& unit : plan_parameter_units(moe, s, placement, 7)) {
      if (unit.id <= kExpertUnitBase) {
        ++expert_units;
        const WeightTensor* fc1 = unit.find(OpRole::expert_fc1, WeightPart::bias);
        const WeightTensor* fc2 = unit.find(OpRole::expert_fc2, WeightPart::bias);
        ASSERT_TRUE(fc1 && fc2);
        EXPECT_EQ(fc1->rows, local);
        EXPECT_EQ(fc1->cols, unit.tensor(OpRole::expert_fc1).cols);
        EXPECT_EQ(fc2->rows, local);
        EXPECT_EQ(fc2->cols, m.hidden_size);
        EXPECT_EQ(fc1->shard.row_offset, (ep - 1) * local);
        EXPECT_EQ(fc1->init_stddev, 0.0f) << "experts' biases start at zero";
        EXPECT_EQ(fc1->offset, unit.tensor(OpRole::expert_fc1).offset + unit.tensor(OpRole::expert_fc1).elements());
        continue;
      }
      if (const WeightTensor* bias = unit.find(OpRole::router, WeightPart::bias)) {
        ++routers;
        EXPECT_EQ(bias->rows, 1);
        EXPECT_EQ(bias->cols, m.moe.num_experts);
        EXPECT_TRUE(bias->tp_replicated);
        EXPECT_GT(bias->init_stddev, 0.0f) << "drawn as the router's weight";
      }
    }
    EXPECT_EQ(expert_units, m.num_layers) << "ep " << ep;
    EXPECT_EQ(routers, m.num_layers) << "ep " << ep;
  }
}

}  // namespace
}  // namespace twin::exec
