// Where weight gradients go, as each framework keeps them (core/framework.hpp): into a buffer kept over the step's
// micro-batches inside the GEMM (gradient accumulation fusion, its dtype the main gradient's), or written apart and
// added by an op of their own (without the fusion: Megatron's main_grad.add_), the dense linears', the experts' and the
// router's alike. Split from framework_lowering_test.cpp (2026-12-03).
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "framework_lowering_fixture.hpp"

namespace twin {
namespace {

using testing_framework::count;
using testing_framework::FrameworkLowered;
using testing_framework::iteration_ns;
using testing_framework::lower_with_framework;

// Megatron's main_grad.add_ hook adds each weight gradient into the main gradient, by default in the reduction's dtype
// (fp32 exactly when it accumulates and all-reduces in fp32): read 2 bytes, read and write 2 or 4.
TEST(FrameworkLowering, UnfusedGradientAccumulationAddsEachWeightGradientIntoTheMainGradient) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);
  const Strategy tp8 = testing::make_strategy(8, 1);  // no data parallelism: compute is the whole iteration
  const FrameworkLowered fused = lower_with_framework(scenario, tp8);
  const auto accumulations = [](const Op& op) { return op.role == OpRole::grad_accumulation; };
  EXPECT_EQ(count(fused.graph, accumulations), 0);
  scenario.framework.gradient_accumulation_fusion = false;
  for (int reduce_bytes : {2, 4}) {
    scenario.framework.reduce_dtype_bytes = reduce_bytes;
    const FrameworkLowered unfused = lower_with_framework(scenario, tp8);
    EXPECT_GT(count(unfused.graph, accumulations), 0);
    // One per linear layer per micro-batch, right after its weight gradient, naming the linear.
    for (const RankClass& rc : unfused.graph.classes)
      for (OpIndex i = 0; i + 1 < rc.size(); ++i) {
        const Op& gemm = rc.op(i);
        const Op& add = rc.op(i + 1);
        if (gemm.kind == OpKind::gemm && gemm.gemm_pass == GemmPass::weight_gradient) {
          ASSERT_TRUE(accumulations(add)) << op_name(gemm);
          EXPECT_EQ(add.linear, gemm.role) << op_name(gemm);
          EXPECT_EQ(add.bytes, (2 + 2 * reduce_bytes) * gemm.gemm.m * gemm.gemm.n) << op_name(gemm);
          EXPECT_EQ(std::tie(add.layer, add.micro_batch, add.chunk), std::tie(gemm.layer, gemm.micro_batch, gemm.chunk));
        }
      }
    EXPECT_GT(iteration_ns(unfused), iteration_ns(fused));
  }
}

// The experts' grouped weight gradients and the router's add theirs apart too (TE's GroupedLinear without
// fuse_wgrad_accumulation, Megatron's hook): every local expert's weights in one op after its grouped GEMM.
TEST(FrameworkLowering, UnfusedGradientAccumulationAddsTheExpertsAndTheRoutersGradients) {
  Scenario scenario = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);
  scenario.framework.moe_token_dispatcher_type = MoeTokenDispatcher::alltoall;
  scenario.framework.gradient_accumulation_fusion = false;
  Strategy ep2 = testing::make_strategy(2, 1);
  ep2.expert_model_parallel_size = 2;
  const FrameworkLowered lowered = lower_with_framework(scenario, ep2);
  std::set<OpRole> added;
  for (const RankClass& rc : lowered.graph.classes)
    for (OpIndex i = 0; i + 1 < rc.size(); ++i) {
      const Op& gemm = rc.op(i);
      if (gemm.kind != OpKind::gemm || gemm.gemm_pass != GemmPass::weight_gradient) continue;
      const Op& add = rc.op(i + 1);
      ASSERT_EQ(add.role, OpRole::grad_accumulation) << op_name(gemm);
      EXPECT_EQ(add.linear, gemm.role) << op_name(gemm);
      EXPECT_EQ(add.bytes, 6 * gemm.gemm.count * gemm.gemm.m * gemm.gemm.n) << op_name(gemm);
      added.insert(gemm.role);
    }
  for (OpRole role : {OpRole::expert_fc1, OpRole::expert_fc2, OpRole::router}) EXPECT_EQ(added.count(role), 1u);
}

// Gradient-accumulation fusion (docs/FRAMEWORK.md): where a buffer keeps the gradients over the step's micro-batches
// (ZeRO 0 and 1), each weight gradient of the first micro-batch writes it and every later one adds to it, in the
// buffer's dtype (main_grad_dtype's, by default reduce_dtype's); ZeRO 2 and 3 reduce every micro-batch's gradients from a fresh buffer and, without
// the fusion, a separate op adds them: their GEMMs write a 16-bit product. No other GEMM says anything but written.
TEST(FrameworkLowering, WeightGradientsAddIntoTheGradientBufferAfterTheFirstMicroBatch) {
  const Scenario base = testing::make_scenario(testing::llama_shaped(2), 1, 1024, 64);
  struct Case {
    int zero_stage;
    bool fusion;
    int reduce_bytes;
    GemmOutput first, later;
  };
  for (const Case& c : {Case{1, true, 2, GemmOutput::written, GemmOutput::added},
                        Case{0, true, 4, GemmOutput::written_fp32, GemmOutput::added_fp32},
                        Case{2, true, 2, GemmOutput::written, GemmOutput::written},
                        Case{1, false, 4, GemmOutput::written, GemmOutput::written}}) {
    SCOPED_TRACE(::testing::Message() << "ZeRO " << c.zero_stage << " fusion " << c.fusion << " bytes " << c.reduce_bytes);
    Scenario scenario = base;
    scenario.framework.gradient_accumulation_fusion = c.fusion;
    scenario.framework.reduce_dtype_bytes = c.reduce_bytes;
    Strategy strategy = testing::make_strategy(1, 1, 1, false);
    strategy.zero_stage = c.zero_stage;
    strategy.micro_batch_size = 2;
    const FrameworkLowered l = lower_with_framework(scenario, strategy);
    ASSERT_GT(l.strategy.num_micro_batches, 1);
    std::set<int> first_seen, later_seen;
    for (const RankClass& rc : l.graph.classes)
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        if (op.kind != OpKind::gemm || op.gemm_pass != GemmPass::weight_gradient) {
          EXPECT_EQ(op.gemm_output, GemmOutput::written) << op_name(op);
          continue;
        }
        EXPECT_EQ(op.gemm_output, op.micro_batch == 0 ? c.first : c.later) << op_name(op) << " mb " << op.micro_batch;
        (op.micro_batch == 0 ? first_seen : later_seen).insert(op.micro_batch);
      }
    EXPECT_FALSE(first_seen.empty());
    EXPECT_FALSE(later_seen.empty());
  }
}

// The optimizer step reads the main gradient in its dtype (AdamW and the norm's pass): its op says so, and is priced so.
TEST(FrameworkLowering, TheOptimizerStepReadsTheMainGradientInItsDtype) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(2), 1, 1024, 8);
  const Strategy dp1 = testing::make_strategy(1, 1, 1, false);
  const auto steps = [](const FrameworkLowered& l) {
    std::vector<const Op*> out;
    for (const RankClass& rc : l.graph.classes)
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (rc.op(i).kind == OpKind::optimizer_step) out.push_back(&rc.op(i));
    return out;
  };
  std::vector<double> iteration;
  for (int main_bytes : {2, 4}) {
    scenario.framework.main_grad_dtype_bytes = main_bytes;
    const FrameworkLowered l = lower_with_framework(scenario, dp1);
    ASSERT_FALSE(steps(l).empty());
    for (const Op* step : steps(l)) EXPECT_EQ(step->main_gradient_bytes, main_bytes) << op_name(*step);
    iteration.push_back(iteration_ns(l));
  }
  EXPECT_GT(iteration[1], iteration[0]);
  // Unstated, the framework's: Megatron's reduction dtype, DeepSpeed's BF16_Optimizer's fp32 gradients.
  scenario.framework.main_grad_dtype_bytes.reset();
  scenario.framework.reduce_dtype_bytes = 4;
  for (const Op* step : steps(lower_with_framework(scenario, dp1))) EXPECT_EQ(step->main_gradient_bytes, 4);
  scenario.framework.reduce_dtype_bytes = 2;
  for (const Op* step : steps(lower_with_framework(scenario, dp1))) EXPECT_EQ(step->main_gradient_bytes, 2);
  scenario.framework.deepspeed_bf16_optimizer = true;
  for (const Op* step : steps(lower_with_framework(scenario, dp1))) EXPECT_EQ(step->main_gradient_bytes, 4);
}

}  // namespace
}  // namespace twin
