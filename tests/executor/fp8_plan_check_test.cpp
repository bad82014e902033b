// What twin execute refuses of FP8 plans before launching (executor/fp8_plan_check.hpp), checked without a GPU.
#include <gtest/gtest.h>

#include "tests/executor/plan_check_fixture.hpp"

namespace twin::exec {
namespace {

using testing_plan_check::executed_plan;
using testing_plan_check::refusal_path;

// FP8 linears run (issue 41 item 3): current scaling, delayed scaling (Megatron's default) and block-wise scaling
// in E4M3 (DeepSeek-V3's); the rest of training.fp8 is refused at its key.
TEST(PlanCheck, RunsFp8RecipesAndRefusesWhatItDoesNotRun) {
  Plan fp8 = executed_plan();
  fp8.scenario.training.fp8 = Fp8Config{Fp8Format::hybrid, Fp8Recipe::tensorwise};
  EXPECT_EQ(refusal_path(fp8), "");
  Plan delayed = fp8;
  delayed.scenario.training.fp8->recipe = Fp8Recipe::delayed;
  delayed.scenario.training.fp8->amax_history_len = 16;
  EXPECT_EQ(refusal_path(delayed), "");
  delayed.scenario.cluster.node_groups.front().gpus_per_node = 2;  // the amaxes all-reduced over the amax group
  delayed.strategy.data_parallel_size = 2;
  EXPECT_EQ(refusal_path(delayed), "");
  Plan context_parallel = delayed;
  context_parallel.strategy.data_parallel_size = 1;
  context_parallel.strategy.context_parallel_size = 2;
  EXPECT_EQ(refusal_path(context_parallel), "");
  // ZeRO shards over the context-parallel ranks too: the casts would read weights other ranks updated (and, under
  // ZeRO-3, whole weights the rank keeps only between gathers).
  for (int zero : {1, 3}) {
    Plan sharded = context_parallel;
    sharded.strategy.zero_stage = zero;
    EXPECT_EQ(refusal_path(sharded), "/strategy/zero_stage") << "ZeRO-" << zero;
  }
  Plan tensor_parallel = delayed;  // TP without SP: bf16 collectives, the amaxes reduced over TP too
  tensor_parallel.strategy.data_parallel_size = 1;
  tensor_parallel.strategy.tensor_model_parallel_size = 2;
  tensor_parallel.strategy.sequence_parallel = false;
  EXPECT_EQ(refusal_path(tensor_parallel), "");
  tensor_parallel.strategy.sequence_parallel = true;  // FP8 gathers over TP with one scale per tensor
  EXPECT_EQ(refusal_path(tensor_parallel), "");
  Plan current_sp = tensor_parallel;
  current_sp.scenario.training.fp8->recipe = Fp8Recipe::tensorwise;
  EXPECT_EQ(refusal_path(current_sp), "");
  current_sp.scenario.training.fp8->wgrad = false;  // the row-parallel wgrad would read a gathered bf16 gradient
  EXPECT_EQ(refusal_path(current_sp), "/scenario/training/fp8/wgrad");
  Plan blockwise_sp = tensor_parallel;  // block-scaled gathers: not here
  blockwise_sp.scenario.training.fp8->recipe = Fp8Recipe::blockwise;
  blockwise_sp.scenario.training.fp8->format = Fp8Format::e4m3;
  EXPECT_EQ(refusal_path(blockwise_sp), "/strategy/sequence_parallel");
  Plan data_parallel = delayed;
  data_parallel.scenario.training.fp8->recipe = Fp8Recipe::tensorwise;
  EXPECT_EQ(refusal_path(data_parallel), "");
  Plan blockwise = data_parallel;  // block scales need no amax reduction: data parallelism runs
  blockwise.scenario.training.fp8->recipe = Fp8Recipe::blockwise;
  EXPECT_EQ(refusal_path(blockwise), "/scenario/training/fp8/format");  // hybrid: E5M2 gradients
  blockwise.scenario.training.fp8->format = Fp8Format::e4m3;
  EXPECT_EQ(refusal_path(blockwise), "");
  Plan mxfp8 = fp8;
  mxfp8.scenario.training.fp8->recipe = Fp8Recipe::mxfp8;
  EXPECT_EQ(refusal_path(mxfp8), "/scenario/training/fp8/recipe");
  Plan parameters = fp8;
  parameters.scenario.training.fp8->param_gather = true;
  EXPECT_EQ(refusal_path(parameters), "/scenario/training/fp8/param_gather");
  Plan fused = fp8;
  fused.scenario.framework.residual_fusion = true;
  EXPECT_EQ(refusal_path(fused), "/scenario/framework/residual_fusion");
  Plan narrow = fp8;
  narrow.scenario.model.ffn_hidden_size += 8;
  EXPECT_EQ(refusal_path(narrow), "/scenario/model/ffn_hidden_size");
  // Linear biases run with FP8 linears (since 2026-12-02: a model with biases ran without them before, and was
  // refused that morning), except under SP at TP > 1, where a row-parallel linear's whole output gradient is
  // gathered in FP8 only.
  Plan biased = fp8;
  biased.scenario.model.add_bias_linear = true;
  EXPECT_EQ(refusal_path(biased), "");
  // Post norms and hidden dropout run with FP8 linears (since 2026-12-06; refused at /scenario/training/fp8 before):
  // the cast of a row-parallel linear's output gradient reads the branch's own gradient, as the bf16 linear does.
  Plan post_norms = fp8;
  post_norms.scenario.model.post_norms = true;
  EXPECT_EQ(refusal_path(post_norms), "");
  Plan dropout = biased;
  dropout.scenario.model.hidden_dropout = 0.1;
  EXPECT_EQ(refusal_path(dropout), "");
  Plan biased_tp = tensor_parallel;
  biased_tp.scenario.model.add_bias_linear = true;
  EXPECT_EQ(refusal_path(biased_tp), "/strategy/sequence_parallel");
  biased_tp.strategy.sequence_parallel = false;
  EXPECT_EQ(refusal_path(biased_tp), "");
  Plan bf16_wgrad = fp8;  // the weight gradient in BF16 (--no-fp8-wgrad) runs the BF16 GEMM beside FP8 ones
  bf16_wgrad.scenario.training.fp8->wgrad = false;
  EXPECT_EQ(refusal_path(bf16_wgrad), "");
}

}  // namespace
}  // namespace twin::exec
