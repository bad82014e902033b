// fp32 main gradients (framework.main_grad_dtype float32, Megatron's default for bf16 training) in twin execute's plan
// check, without a GPU: what runs, and each refusal at its key (executor/main_gradient_check.hpp).
#include <string>

#include <gtest/gtest.h>

#include "executor/plan_check.hpp"
#include "tests/executor/plan_check_fixture.hpp"

namespace twin::exec {
namespace {

using testing_plan_check::executed_plan;
using testing_plan_check::refusal_path;

// The recorded one-GPU plan over two GPUs of data parallelism, ZeRO `zero`.
Plan data_parallel(int zero) {
  Plan plan = executed_plan();
  plan.scenario.cluster.node_groups.front().gpus_per_node = 2;
  plan.strategy.data_parallel_size = 2;
  plan.strategy.zero_stage = zero;
  plan.scenario.strategy = plan.strategy;
  return plan;
}

TEST(PlanCheckMainGradient, Fp32MainGradientsRunForDenseModels) {
  Plan fp32 = executed_plan();
  fp32.scenario.framework.main_grad_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(fp32), "");  // one GPU: nothing is reduced, whatever reduce_dtype says
  Plan megatron = executed_plan();    // Megatron's default: the reduction in fp32, the main gradient with it
  megatron.scenario.framework.reduce_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(megatron), "");
  megatron.scenario.framework.gradient_accumulation_fusion = false;  // added apart into fp32
  EXPECT_EQ(refusal_path(megatron), "");
  Plan moe = executed_plan();  // the experts' grouped weight gradients and the router's into fp32
  moe.scenario.model.moe.num_experts = 4;
  moe.scenario.model.moe.top_k = 2;
  moe.scenario.model.moe.ffn_hidden_size = moe.scenario.model.ffn_hidden_size / 2;
  moe.scenario.framework.main_grad_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(moe), "");
  for (int zero : {0, 1}) {
    Plan replicated = data_parallel(zero);
    replicated.scenario.framework.reduce_dtype_bytes = 4;
    EXPECT_EQ(refusal_path(replicated), "") << "ZeRO " << zero;
  }
}

TEST(PlanCheckMainGradient, TheReductionMovesTheMainGradientAsItIsKept) {
  Plan fp32_reduction = data_parallel(1);  // an fp32 reduction of bf16 main gradients
  fp32_reduction.scenario.framework.reduce_dtype_bytes = 4;
  fp32_reduction.scenario.framework.main_grad_dtype_bytes = 2;
  EXPECT_EQ(refusal_path(fp32_reduction), "/scenario/framework/reduce_dtype");
  Plan bf16_reduction = data_parallel(1);  // NeMo 22.08's fp32 buffer beside a bf16 reduction
  bf16_reduction.scenario.framework.main_grad_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(bf16_reduction), "/scenario/framework/reduce_dtype");
  Plan one_gpu = executed_plan();  // the same dtypes with nothing to reduce
  one_gpu.scenario.framework.main_grad_dtype_bytes = 4;
  one_gpu.scenario.framework.reduce_dtype_bytes = 2;
  EXPECT_EQ(refusal_path(one_gpu), "");
}

TEST(PlanCheckMainGradient, RefusesFp32BesideBf16OnlyPaths) {
  Plan sharded = data_parallel(2);  // ZeRO-2's bf16 gradient shards
  sharded.scenario.framework.reduce_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(sharded), "/strategy/zero_stage");
  sharded.scenario.framework.reduce_dtype_bytes = 2;
  EXPECT_EQ(refusal_path(sharded), "");
  Plan fp8 = executed_plan();
  fp8.scenario.training.fp8 = Fp8Config{Fp8Format::hybrid, Fp8Recipe::tensorwise};
  fp8.scenario.framework.main_grad_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(fp8), "/scenario/framework/main_grad_dtype");
  Plan sinks = executed_plan();
  sinks.scenario.model.attention_sinks = true;
  sinks.scenario.framework.main_grad_dtype_bytes = 4;
  EXPECT_EQ(refusal_path(sinks), "/scenario/framework/main_grad_dtype");
}

}  // namespace
}  // namespace twin::exec
