// The lowerings walk the layer description (core/layer.hpp): the ops of one layer, mapped to the block
// that owns their role, come in the description's block order forward and in reverse backward, for
// Megatron TP (dense and MoE) and for the Ulysses layer of the per-layer family.
#include <gtest/gtest.h>

#include <vector>

#include "core/layer.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/per_layer/per_layer_lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

// The block of the description an op belongs to (collectives around linears and CP exchanges: none).
OpRole block_role(const Op& op) {
  switch (op.role) {
    case OpRole::rope: return OpRole::core_attention;
    case OpRole::dispatch: case OpRole::expert_fc1: case OpRole::expert_activation: case OpRole::expert_fc2:
    case OpRole::combine: return OpRole::router;
    case OpRole::tp_gather: case OpRole::tp_scatter: case OpRole::tp_reduce: case OpRole::cp_exchange:
    case OpRole::grad_accumulation: return OpRole::none;
    default: return op.role;
  }
}

// The blocks the ops of `phase` visit, each once per run of consecutive ops.
std::vector<OpRole> visited_blocks(const RankClass& rc, Phase phase) {
  std::vector<OpRole> blocks;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.phase != phase || op.recomputed) continue;
    const OpRole role = block_role(op);
    if (role != OpRole::none && (blocks.empty() || blocks.back() != role)) blocks.push_back(role);
  }
  return blocks;
}

void expect_layer_follows_description(const RankClass& rc, bool moe, const char* name) {
  std::vector<OpRole> forward, backward;
  for (const layer::Block& block : layer::layer_blocks(moe)) forward.push_back(block.role);
  backward.assign(forward.rbegin(), forward.rend());
  EXPECT_EQ(visited_blocks(rc, Phase::forward), forward) << name;
  EXPECT_EQ(visited_blocks(rc, Phase::backward), backward) << name;
}

RankClass one_layer(const Scenario& scenario, const lowering::RankShapes& shapes, bool ulysses) {
  RankClass rc;
  lowering::Emitter e(rc, shapes);
  e.begin_pass(Phase::forward, 0, 0);
  ulysses ? per_layer::emit_ulysses_layer_forward(e, scenario.model, 0)
          : lowering::emit_layer_forward(e, scenario.model, 0);
  e.begin_pass(Phase::backward, 0, 0);
  ulysses ? per_layer::emit_ulysses_layer_backward(e, scenario.model, 0)
          : lowering::emit_layer_backward(e, scenario.model, 0);
  return rc;
}

TEST(LayerLowering, MegatronLayersFollowTheDescription) {
  for (bool moe : {false, true}) {
    for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
      const Scenario scenario =
          testing::make_scenario(moe ? testing::moe_shaped() : testing::llama_shaped(4), 2, 2048, 64);
      Strategy strategy = testing::make_strategy(2, 1, 1, true);
      strategy.recompute = recompute;
      if (moe) strategy.expert_model_parallel_size = 2;
      ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
      const RankClass rc = one_layer(scenario, lowering::rank_shapes(scenario, strategy), false);
      expect_layer_follows_description(rc, scenario.model.is_moe_layer(0),
                                       moe ? "MoE, tp2 sp ep2" : "dense, tp2 sp");
    }
  }
}

TEST(LayerLowering, UlyssesLayersFollowTheDescription) {
  const Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 2, 2048, 64);
  for (Recompute recompute : {Recompute::none, Recompute::selective}) {
    LayerStrategy strategy{{4, true}, 1, recompute};
    const RankClass rc = one_layer(scenario, per_layer::layer_shapes(scenario, strategy, 8, 8), true);
    expect_layer_follows_description(rc, false, "Ulysses over 4");
    int all_to_alls = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) all_to_alls += rc.op(i).kind == OpKind::all_to_all;
    EXPECT_EQ(all_to_alls, 4);  // Q K V and the output forward, their gradients backward
  }
}

}  // namespace
}  // namespace twin
