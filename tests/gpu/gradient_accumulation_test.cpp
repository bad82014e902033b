// Weight gradients without gradient accumulation fusion (framework.gradient_accumulation_fusion false) on one GPU:
// each linear's GEMM writes its gradient apart and a grad_accumulation op stores or adds it
// (executor/gpu/dense_block_accumulation.cpp). One step of the recorded small plan (four micro-batches of 2; Llama
// widths, then with GPT's biases and tied embeddings) against the same step with the fusion, whose GEMMs add in place (cuBLASLt's
// beta 1): the reference. The forward is the same, so the losses are equal bit for bit; the gradients may differ by
// the bf16 rounding of each micro-batch's product before its add. And the same step with fp32 main gradients.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "executor/gpu/communicators.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "executor/layout_groups.hpp"
#include "executor/token_stream.hpp"
#include "gpu/checks.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/families/rank_plan.hpp"
#include "tests/gpu/kernel_test_util.hpp"
#include "tests/reports/execution_fixture.hpp"

namespace twin::exec {
namespace {

struct StepGradients {
  double loss_sum = 0;
  std::vector<std::vector<double>> units;  // each parameter unit's gradients, in the runtime's unit order
  bool fp32 = false;                       // the main gradients were fp32
};

// The plan's first step as twin execute runs it on one GPU, gradient clipping off so that the gradients stay as the
// backward left them.
StepGradients one_step(const Plan& plan) {
  const PlanGraphs lowered = plan_graphs(plan, "best.json");
  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));
  Communicators comms(plan.strategy, lowered.graph, 0, 1, id, other_layouts(lowered));
  const PlanPart& part = lowered.parts.at(0);
  const TokenShare share = rank_token_share(lowered, 0, 0);
  StepPart step;
  step.loss_tokens = lowered.tokens_per_step();
  step.micro_batches = part.strategy.num_micro_batches;
  TrainingOptions options;
  options.recipe.clip_grad = 0;
  const RankClass& rank_class = lowered.graph.classes.at(static_cast<std::size_t>(part.class_of_rank.at(0)));
  StageRuntime runtime(part, lowered.graph, rank_class, 0, comms, options, step);
  Watchdog watchdog(120, {[&comms] { return comms.async_error(); }, [&comms] { comms.abort_all(); }});
  const TokenStream stream{plan.scenario.model.vocab_size, plan.scenario.training.seq_length, 7};
  runtime.run_iteration(0, share_tokens(stream, 0, share), nullptr, watchdog);
  StepGradients out;
  out.loss_sum = runtime.last_loss_sum();
  for (const ParameterUnit* unit : runtime.parameters()->units()) {
    const auto count = static_cast<std::size_t>(unit->elements);
    out.fp32 = unit->grads.type == kernels::GradType::f32;
    out.units.push_back(out.fp32 ? test::f32_to_host(unit->grads.data, count)
                                 : test::bf16_to_host(unit->grads.data, count));
  }
  return out;
}

// Tolerance: each micro-batch's product rounded to bf16 (2^-9 relative) before a bf16 add, four times, against one
// rounding: ||a - b|| / ||b|| well under 1e-2. A micro-batch's contribution lost or counted twice is about 0.25 off.
// The fused step run twice shows the floor under that (cuDNN's attention backward adds with atomics, so the
// activations' gradients, and every weight gradient before them, may move run to run); printed beside.
TEST(GradientAccumulationGpu, GradientsAddedApartMatchTheFusedOnes) {
  REQUIRE_GPU();
  for (bool biases : {false, true}) {
    Plan fused = read_plan(testing::executed_fixture("small-single-h200") / "best.json");
    fused.scenario.model.add_bias_linear = biases;
    fused.scenario.model.untie_embeddings_and_output_weights = !biases;  // GPT's: biases and a tied table
    ASSERT_GT(fused.strategy.num_micro_batches, 1);
    Plan apart = fused;
    apart.scenario.framework.gradient_accumulation_fusion = false;
    const StepGradients reference = one_step(fused), again = one_step(fused), got = one_step(apart);
    EXPECT_EQ(got.loss_sum, reference.loss_sum) << "biases " << biases;
    ASSERT_EQ(got.units.size(), reference.units.size());
    for (std::size_t u = 0; u < got.units.size(); ++u) {
      double norm2 = 0;
      for (double g : reference.units[u]) norm2 += g * g;
      const double error = test::relative_error(got.units[u], reference.units[u]);
      std::printf("biases %d, unit %zu: %zu gradients, |g| %.4g, relative L2 difference %.3g (fused run twice: "
                  "%.3g)\n",
                  biases, u, reference.units[u].size(), std::sqrt(norm2), error,
                  test::relative_error(again.units[u], reference.units[u]));
      EXPECT_GT(norm2, 0) << "biases " << biases << ", unit " << u;
      EXPECT_LT(error, 1e-2) << "biases " << biases << ", unit " << u;
    }
  }
}

// fp32 main gradients (framework.main_grad_dtype float32): the weight-gradient GEMMs store and add fp32 C, the norms',
// biases' and embeddings' kernels add into fp32, a gradient apart is added in fp32. Against the bf16 step (each
// micro-batch's sum rounded to bf16 four times): within 1e-2, as above; fused against apart in fp32 (the apart
// products rounded to bf16 once each, then summed in fp32) the same. The losses are the same bits: the forward is.
// With experts (4, top-2; no adds apart for them) the grouped weight gradients and the router's, against bf16 alike.
TEST(GradientAccumulationGpu, Fp32MainGradientsMatchTheBf16Ones) {
  REQUIRE_GPU();
  for (int variant : {0, 1, 2}) {  // Llama widths; GPT's biases and tied table; experts
    const bool biases = variant == 1, experts = variant == 2;
    Plan bf16 = read_plan(testing::executed_fixture("small-single-h200") / "best.json");
    bf16.scenario.model.add_bias_linear = biases;
    bf16.scenario.model.untie_embeddings_and_output_weights = !biases;
    if (experts) {  // as a scenario's moe section reads (core/scenario_model.cpp), each expert half the dense MLP
      bf16.scenario.model.moe.num_experts = 4;
      bf16.scenario.model.moe.top_k = 2;
      bf16.scenario.model.moe.ffn_hidden_size = bf16.scenario.model.ffn_hidden_size / 2;
    }
    Plan fp32 = bf16;
    fp32.scenario.framework.main_grad_dtype_bytes = 4;
    Plan fp32_apart = fp32;
    fp32_apart.scenario.framework.gradient_accumulation_fusion = experts;  // experts add in their GEMMs only
    const StepGradients reference = one_step(bf16), fused = one_step(fp32), apart = one_step(fp32_apart);
    EXPECT_FALSE(reference.fp32);
    EXPECT_TRUE(fused.fp32 && apart.fp32) << "the plan's main gradients were not fp32";
    EXPECT_EQ(fused.loss_sum, reference.loss_sum) << "variant " << variant;
    EXPECT_EQ(apart.loss_sum, reference.loss_sum) << "variant " << variant;
    ASSERT_EQ(fused.units.size(), reference.units.size());
    for (std::size_t u = 0; u < fused.units.size(); ++u) {
      const double against_bf16 = test::relative_error(fused.units[u], reference.units[u]);
      const double apart_against_fused = test::relative_error(apart.units[u], fused.units[u]);
      std::printf("variant %d, unit %zu: fp32 against bf16 %.3g, fp32 apart against fp32 fused %.3g\n", variant, u,
                  against_bf16, apart_against_fused);
      EXPECT_LT(against_bf16, 1e-2) << "variant " << variant << ", unit " << u;
      EXPECT_LT(apart_against_fused, 1e-2) << "variant " << variant << ", unit " << u;
    }
  }
}

}  // namespace
}  // namespace twin::exec
