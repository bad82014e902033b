// The framework switches twin execute runs or refuses before launching, checked without a GPU: each refusal names the
// plan file and the JSON path of the switch (split from plan_check_test.cpp, 2026-12-03).
#include <string>

#include <gtest/gtest.h>

#include "executor/plan_check.hpp"
#include "tests/executor/plan_check_fixture.hpp"

namespace twin::exec {
namespace {

using testing_plan_check::executed_plan;
using testing_plan_check::refusal_path;

TEST(PlanCheck, RefusesFrameworkSwitchesTheExecutorDoesNotRun) {
  // The loss without fusion runs at TP 1 (since 2026-12-03; refused at its key before), not under TP or with capped
  // logits.
  Plan unfused_loss = executed_plan();
  unfused_loss.scenario.framework.cross_entropy_loss_fusion = false;
  EXPECT_EQ(refusal_path(unfused_loss), "");
  Plan unfused_capped = unfused_loss;
  unfused_capped.scenario.model.final_logit_softcap = 30;
  EXPECT_EQ(refusal_path(unfused_capped), "/scenario/framework/cross_entropy_loss_fusion");
  Plan unfused_tp = unfused_loss;
  unfused_tp.scenario.cluster.node_groups.front().gpus_per_node = 2;
  unfused_tp.strategy.tensor_model_parallel_size = 2;
  EXPECT_EQ(refusal_path(unfused_tp), "/scenario/framework/cross_entropy_loss_fusion");
  unfused_tp.scenario.framework.cross_entropy_loss_fusion = true;
  EXPECT_EQ(refusal_path(unfused_tp), "");
  // Weight gradients written apart and added (since 2026-12-03; refused at its key before) for the dense linears'
  // bf16 GEMMs; the experts' grouped GEMMs and FP8 linears have no such op.
  Plan unfused_accumulation = executed_plan();
  unfused_accumulation.scenario.framework.gradient_accumulation_fusion = false;
  EXPECT_EQ(refusal_path(unfused_accumulation), "");
  Plan unfused_fp8 = unfused_accumulation;
  unfused_fp8.scenario.training.fp8 = Fp8Config{Fp8Format::hybrid, Fp8Recipe::tensorwise};
  EXPECT_EQ(refusal_path(unfused_fp8), "/scenario/framework/gradient_accumulation_fusion");
  unfused_fp8.scenario.framework.gradient_accumulation_fusion = true;
  EXPECT_NE(refusal_path(unfused_fp8), "/scenario/framework/gradient_accumulation_fusion");
  Plan unfused_moe = unfused_accumulation;
  unfused_moe.scenario.model.moe.num_experts = 4;
  unfused_moe.scenario.model.moe.top_k = 2;
  EXPECT_EQ(refusal_path(unfused_moe), "/scenario/framework/gradient_accumulation_fusion");
  Plan scattered = executed_plan();  // Megatron-LM of 2021-22's pipeline sends: the executor sends whole tensors
  scattered.scenario.framework.scatter_gather_tensors_in_pipeline = true;
  EXPECT_EQ(refusal_path(scattered), "/scenario/framework/scatter_gather_tensors_in_pipeline");
  // The main gradient's and the reduction's dtypes: plan_check_main_gradient_test.cpp.
  Plan bf16_optimizer = executed_plan();  // DeepSpeed's BF16_Optimizer: the executor runs Megatron's optimizers
  bf16_optimizer.scenario.framework.deepspeed_bf16_optimizer = true;
  EXPECT_EQ(refusal_path(bf16_optimizer), "/scenario/framework/deepspeed_bf16_optimizer");
  // PyTorch's early-stopping checkpoint runs at TP 1 in BF16 layers (tests/gpu/checkpoint_early_stop_device.sh);
  // under TP and with FP8 linears it is priced only.
  Plan early_stop = executed_plan();
  early_stop.scenario.framework.checkpoint_early_stop = true;
  early_stop.strategy.recompute = Recompute::full;
  early_stop.scenario.strategy = early_stop.strategy;
  EXPECT_EQ(refusal_path(early_stop), "");
  Plan early_stop_fp8 = early_stop;
  early_stop_fp8.scenario.training.fp8 = Fp8Config{Fp8Format::hybrid, Fp8Recipe::tensorwise};
  EXPECT_EQ(refusal_path(early_stop_fp8), "/scenario/framework/checkpoint_early_stop");
  early_stop_fp8.strategy.recompute = Recompute::selective;  // nothing recomputes whole layers: nothing stops early
  early_stop_fp8.scenario.strategy = early_stop_fp8.strategy;
  EXPECT_NE(refusal_path(early_stop_fp8), "/scenario/framework/checkpoint_early_stop");
  Plan early_stop_tp = early_stop;  // the recomputed forward's TP all-reduces
  early_stop_tp.scenario.cluster.node_groups.front().gpus_per_node = 2;
  early_stop_tp.strategy.tensor_model_parallel_size = 2;
  early_stop_tp.scenario.strategy = early_stop_tp.strategy;
  EXPECT_EQ(refusal_path(early_stop_tp), "/scenario/framework/checkpoint_early_stop");
  early_stop_tp.scenario.framework.checkpoint_early_stop = false;
  EXPECT_EQ(refusal_path(early_stop_tp), "");
  // DeepSpeed's ZeRO-3 is priced only; below ZeRO-3 the switch changes nothing and the plan runs.
  Plan deepspeed = executed_plan();
  deepspeed.scenario.framework.zero_implementation = ZeroImplementation::deepspeed;
  EXPECT_EQ(refusal_path(deepspeed), "");
  deepspeed.strategy.zero_stage = 3;
  deepspeed.scenario.strategy = deepspeed.strategy;
  EXPECT_EQ(refusal_path(deepspeed), "/scenario/framework/zero_implementation");
  // A pytorch-fsdp2 plan prices PyTorch's run (strategies/pytorch_fsdp2.hpp), not what twin execute would run.
  Plan pytorch = executed_plan();
  pytorch.scenario.framework.name = FrameworkName::pytorch_fsdp2;
  EXPECT_EQ(refusal_path(pytorch), "/scenario/framework/name");
  pytorch.scenario.framework.name = FrameworkName::pytorch_fsdp;  // FSDP1 likewise
  EXPECT_EQ(refusal_path(pytorch), "/scenario/framework/name");
  // Megatron's combined 1F1B with all-to-all overlap is priced by the simulator only.
  Plan overlapped = executed_plan();
  overlapped.scenario.framework.overlap_moe_expert_parallel_comm = true;
  EXPECT_EQ(refusal_path(overlapped), "/scenario/framework/overlap_moe_expert_parallel_comm");
  // The output layer's weight gradients deferred to the pipeline's drain are priced only; one stage defers nothing.
  Plan deferred = executed_plan();
  deferred.scenario.framework.defer_embedding_wgrad_compute = true;
  EXPECT_EQ(refusal_path(deferred), "");
  deferred.scenario.cluster.node_groups.front().gpus_per_node = 2;
  deferred.strategy.pipeline_model_parallel_size = 2;
  deferred.scenario.strategy = deferred.strategy;
  EXPECT_EQ(refusal_path(deferred), "/scenario/framework/defer_embedding_wgrad_compute");
}

}  // namespace
}  // namespace twin::exec
