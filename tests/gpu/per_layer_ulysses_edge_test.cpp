// A per-layer plan whose embedding and output layer hold half a sample each (beside Ulysses layers of group 2, one
// sample per stage micro-batch on 2 GPUs: each GPU embeds, and computes the logits and cross-entropy of, its half of
// the sequence, as DeepSpeed-Ulysses shards the sequence from the input on), run one thread per GPU, against the
// same model on one GPU with whole samples (every layer TP 1): the step's loss and the embedding's and output
// layer's weight gradients (after their data-parallel all-reduce) must agree. The one-GPU run is the independent
// reference: another row split, no all-to-all, no gradient reduction.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "executor/gpu/communicators.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "executor/layout_groups.hpp"
#include "executor/token_stream.hpp"
#include "gpu/checks.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/families/rank_plan.hpp"
#include "tests/executor/ulysses_edge_fixture.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::exec {
namespace {

// One step's loss (mean over the step's tokens) and, from GPU 0, the embedding's and output layer's gradients.
struct EdgeStep {
  double loss = 0;
  std::vector<double> embedding, head;
};

// Rank `rank` of the plan's first step, as twin execute runs it (execute.cpp: its communicators, its share of the
// tokens, its runtime), gradient clipping off so that the gradients stay as the backward left them.
void edge_test_rank(const Plan& plan, const PlanGraphs& lowered, int rank, ncclUniqueId id, double& loss_sum,
                    EdgeStep& out) {
  TWIN_CUDA_CHECK(cudaSetDevice(rank));
  const std::vector<PlanPart> parts = rank_parts(lowered, rank);
  const PlanPart& part = parts.at(0);
  Communicators comms(plan.strategy, lowered.graph, rank, lowered.world_size(), id, other_layouts(lowered));
  const TokenShare share = rank_token_share(lowered, rank, 0);
  StepPart step;
  step.loss_tokens = lowered.tokens_per_step();
  step.micro_batches = part.strategy.num_micro_batches;
  step.input_first_row = share.inputs.first_row(testing::kUlyssesEdgeSeq);
  TrainingOptions options;
  options.recipe.clip_grad = 0;
  const RankClass& rank_class = lowered.graph.classes.at(static_cast<std::size_t>(part.class_of_rank.at(rank)));
  StageRuntime runtime(part, lowered.graph, rank_class, rank, comms, options, step);
  Watchdog watchdog(120, {[&comms] { return comms.async_error(); }, [&comms] { comms.abort_all(); }});
  const TokenStream stream{plan.scenario.model.vocab_size, testing::kUlyssesEdgeSeq, 7};
  runtime.run_iteration(0, share_tokens(stream, 0, share), nullptr, watchdog);
  loss_sum = runtime.last_loss_sum();
  if (rank != 0) return;
  for (auto [unit, grads] : {std::pair{kEmbeddingUnit, &out.embedding}, std::pair{kHeadUnit, &out.head}}) {
    const ParameterUnit& held = runtime.parameters()->unit(unit);
    *grads = test::bf16_to_host(held.bf16_grads(), static_cast<std::size_t>(held.elements));
  }
}

EdgeStep edge_test_step(const Plan& plan) {
  const PlanGraphs lowered = plan_graphs(plan, "best.json");
  const int gpus = lowered.world_size();
  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));
  std::vector<double> loss_sums(static_cast<std::size_t>(gpus));
  std::vector<std::string> errors(static_cast<std::size_t>(gpus));
  EdgeStep out;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < gpus; ++rank)
    threads.emplace_back([&, rank] {
      try {
        edge_test_rank(plan, lowered, rank, id, loss_sums[static_cast<std::size_t>(rank)], out);
      } catch (const std::exception& error) {
        errors[static_cast<std::size_t>(rank)] = error.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& error : errors)
    if (!error.empty()) throw std::runtime_error(error);
  for (double sum : loss_sums) out.loss += sum;
  out.loss /= static_cast<double>(lowered.tokens_per_step());
  return out;
}

// Tolerances: both runs keep activations and gradients in bf16 (unit roundoff 2^-8 = 3.9e-3) with fp32 GEMM
// accumulation, over different row splits (cuBLASLt picks per shape) and, here, a bf16 all-reduce of two halves:
// each gradient element carries a few bf16 roundings that do not cancel, so its relative error is a few 2^-9 at
// most; over a tensor, ||a - b|| / ||b|| 1e-2 (measured: docs/ACCURACY.md). The loss is fp32 sums of per-token
// losses from bf16 logits: 1e-3 relative. A gradient missing a GPU's half of the rows is 0.5 to 1 off.
TEST(PerLayerUlyssesEdge, HalfSampleEdgesMatchTheWholeSampleRun) {
  if (test::gpu_count() < 2) GTEST_SKIP() << "needs 2 CUDA GPUs; found " << test::gpu_count();
  const LayerStrategy usp2{{2, true}, 0, Recompute::none}, tp2{{2, false}, 0, Recompute::none};
  const LayerStrategy tp1{{1, false}, 0, Recompute::none};
  const Plan halves = testing::ulysses_edge_plan(2, {usp2, tp2, usp2});
  const PlanGraphs lowered = plan_graphs(halves, "best.json");
  ASSERT_EQ(rank_token_share(lowered, 1, 0).inputs, (SequenceRun{0, 1, 1, 2}));  // GPU 1: the second half
  ASSERT_EQ(rank_token_share(lowered, 1, 0).targets, (SequenceRun{0, 1, 1, 2}));
  const EdgeStep sharded = edge_test_step(halves);
  const EdgeStep whole = edge_test_step(testing::ulysses_edge_plan(1, {tp1, tp1, tp1}));
  std::printf("loss: halves %.6f, whole %.6f\n", sharded.loss, whole.loss);
  EXPECT_NEAR(sharded.loss, whole.loss, 1e-3 * whole.loss);
  EXPECT_GT(whole.loss, 5);  // about ln(1024): the data's vocabulary, untrained
  for (const auto& [name, a, b] : {std::tuple{"embedding", &sharded.embedding, &whole.embedding},
                                   std::tuple{"output layer", &sharded.head, &whole.head}}) {
    ASSERT_EQ(a->size(), b->size()) << name;
    double norm = 0;
    for (double g : *b) norm += g * g;
    const double error = test::relative_error(*a, *b);
    std::printf("%s gradient: %zu elements, |g| %.4g, relative L2 difference %.3g\n", name, b->size(),
                std::sqrt(norm), error);
    EXPECT_GT(norm, 0) << name;
    EXPECT_LT(error, 1e-2) << name;
  }
}

}  // namespace
}  // namespace twin::exec
