// The lowering and twin execute agree on multi-latent attention op for op: every op of the MLA scenario's plans
// (scenarios/exec-deepseek-v3-mla-small-1xH200.json, each micro-batch size and recompute it searches, so its best
// plan among them) binds, each MLA layer's ops bind to the block's steps, and the steps of each micro-batch's pass
// are MlaAttention's, in its order (executor/mla_steps.hpp); each projection's GEMMs have its weight's shape in the
// parameter layout; each weight's first gradient of a step is stored.
// The plan check refuses MLA under TP or CP at /scenario/model/mla.
#include <filesystem>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "executor/op_binding.hpp"
#include "executor/parameters.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

const std::filesystem::path kScenario =
    std::filesystem::path(TWIN_SOURCE_DIR) / "scenarios" / "exec-deepseek-v3-mla-small-1xH200.json";

// A projection's GEMM has its weight's shape [in, out] as the layout holds it: forward (tokens, out, in), input
// gradient (tokens, in, out), weight gradient (in, out, tokens), as the dense linears' (executor/gpu/dense_block.cpp).
void expect_weight_shape(const Op& op, const WeightTensor& w) {
  const std::int64_t in = w.rows, out = w.cols;
  switch (op.gemm_pass) {
    case GemmPass::forward: EXPECT_TRUE(op.gemm.n == out && op.gemm.k == in) << op_name(op); return;
    case GemmPass::input_gradient: EXPECT_TRUE(op.gemm.n == in && op.gemm.k == out) << op_name(op); return;
    case GemmPass::weight_gradient: EXPECT_TRUE(op.gemm.m == in && op.gemm.n == out) << op_name(op); return;
    case GemmPass::none: ADD_FAILURE() << op_name(op) << " says no pass";
  }
}

bool mla_role(OpRole role) {
  return role == OpRole::mla_q_down || role == OpRole::mla_q_norm || role == OpRole::mla_q_up ||
         role == OpRole::mla_kv_down || role == OpRole::mla_kv_norm || role == OpRole::mla_kv_up ||
         role == OpRole::mla_kv_expand;
}

TEST(MlaBinding, TheScenariosPlansBindStepForStep) {
  const Scenario scenario = load_scenario(kScenario);
  ASSERT_TRUE(scenario.model.mla.enabled());
  const bool latent = scenario.model.mla.q_lora_rank > 0;
  int plans = 0;
  for (const int micro_batch : {1, 2, 4})
    for (const Recompute recompute : {Recompute::none, Recompute::selective}) {
      Strategy strategy = testing::make_strategy(1, 1, 1, false);
      strategy.micro_batch_size = micro_batch;
      strategy.recompute = recompute;
      ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
      const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
      ASSERT_EQ(graph.classes.size(), 1u);
      const RankClass& rc = graph.classes.front();
      const std::vector<OpBinding> bindings = bind_ops(rc, false, true);  // throws on an op it does not run
      // Bound as a model without MLA, its projections are refused, not run as dense linears.
      EXPECT_THROW(bind_ops(rc, false, false), std::invalid_argument);
      const auto units = plan_parameter_units(scenario, strategy, placement_of(strategy, 0), 7);
      // (micro-batch, layer, backward) -> the steps its ops bind to, in op order; a recomputed forward aside.
      std::map<std::tuple<int, int, bool>, std::vector<MlaStep>> passes;
      std::map<std::pair<int, OpRole>, int> stored;
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        const OpBinding& b = bindings[i];
        const bool rope_or_attention = op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward ||
                                       op.kind == OpKind::rope_forward || op.kind == OpKind::rope_backward;
        if (mla_role(op.role) || rope_or_attention)
          EXPECT_EQ(b.action, Action::mla_step) << op_name(op) << " binds to " << to_string(b.action);
        if (b.action != Action::mla_step) continue;
        if (b.first_gradient) ++stored[{op.layer, b.subject}];
        if (op.kind == OpKind::gemm)
          for (const ParameterUnitLayout& unit : units)
            if (unit.id == op.layer) expect_weight_shape(op, unit.tensor(b.subject));
        if (op.recomputed) {
          EXPECT_EQ(b.mla_step, MlaStep::attention) << "selective recompute repeats attention's forward only";
          continue;
        }
        passes[{op.micro_batch, op.layer, op.phase == Phase::backward}].push_back(b.mla_step);
      }
      const int micro_batches = strategy.num_micro_batches, layers = scenario.model.num_layers;
      EXPECT_EQ(static_cast<int>(passes.size()), 2 * micro_batches * layers);
      for (const auto& [key, steps] : passes) {
        const auto want = mla_steps(std::get<2>(key), latent);
        EXPECT_EQ(steps, std::vector<MlaStep>(want.begin(), want.end()))
            << "micro-batch " << std::get<0>(key) << " layer " << std::get<1>(key) << " backward " << std::get<2>(key);
      }
      // Six weights per layer, each stored once a step (the rest of its gradients add).
      EXPECT_EQ(static_cast<int>(stored.size()), (latent ? 6 : 4) * layers);
      for (const auto& [weight, count] : stored) EXPECT_EQ(count, 1) << to_string(weight.second);
      ++plans;
    }
  EXPECT_EQ(plans, 6);
}

}  // namespace
}  // namespace twin::exec
