// Megatron's overlapped EP schedule (framework.overlap_moe_expert_parallel_comm): the issue order of a layer pair,
// the extra warm-up forward, the candidates Megatron refuses, and the graph replayed in the engine.
#include <gtest/gtest.h>

#include <algorithm>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/combined_1f1b.hpp"
#include "strategies/lower_bound.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/schedule.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

Op compute(OpRole role, GemmPass pass = GemmPass::none) {
  Op op;
  op.kind = pass == GemmPass::none ? OpKind::elementwise : OpKind::gemm;
  op.gemm_pass = pass;
  op.role = role;
  return op;
}
Op all_to_all(OpRole role) {
  Op op;
  op.kind = OpKind::all_to_all;
  op.group = GroupKind::expert;
  op.stream = Stream::ep_comm;
  op.role = role;
  return op;
}

// A layer's forward: attention, permute, dispatch, expert FC1, combine, unpermute.
std::vector<Op> forward_layer() {
  return {compute(OpRole::qkv_projection, GemmPass::forward), compute(OpRole::dispatch), all_to_all(OpRole::dispatch),
          compute(OpRole::expert_fc1, GemmPass::forward), all_to_all(OpRole::combine), compute(OpRole::combine)};
}
// Its backward: unpermute's backward, combine, the experts' dgrad and wgrad, dispatch, permute's backward, attention.
std::vector<Op> backward_layer() {
  return {compute(OpRole::combine), all_to_all(OpRole::combine), compute(OpRole::expert_fc1, GemmPass::input_gradient),
          compute(OpRole::expert_fc1, GemmPass::weight_gradient), all_to_all(OpRole::dispatch),
          compute(OpRole::dispatch), compute(OpRole::qkv_projection, GemmPass::input_gradient)};
}

// TransformerLayerSchedulePlan.run's order: combine backward, attention forward and dispatch, the experts' backward,
// dispatch backward, the experts forward and combine, attention backward, then the forward's unpermutation.
TEST(Combined1F1B, IssuesALayerPairAsMegatronsSchedulePlan) {
  const auto order = combined_layer_order(forward_layer(), backward_layer(), false);
  ASSERT_TRUE(order);
  const std::vector<IssuedOp> expected = {{true, 0}, {true, 1}, {false, 0}, {false, 1}, {false, 2},
                                          {true, 2}, {true, 3}, {true, 4, 3},  // dispatch backward after the wgrad
                                          {false, 3}, {false, 4}, {true, 5}, {true, 6}, {false, 5}};
  EXPECT_EQ(*order, expected);
}

// --delay-wgrad-compute: the experts' weight gradients issued after the dispatch backward, which waits only for
// their input gradients.
TEST(Combined1F1B, DelayedWeightGradientsRunBesideTheDispatchBackward) {
  const auto order = combined_layer_order(forward_layer(), backward_layer(), true);
  ASSERT_TRUE(order);
  const auto at = [&](IssuedOp op) { return std::find(order->begin(), order->end(), op) - order->begin(); };
  EXPECT_LT(at({true, 4}), at({true, 3}));
  EXPECT_EQ(at({true, 2}) + 1, at({true, 4}));
  EXPECT_EQ(order->size(), forward_layer().size() + backward_layer().size());
}

TEST(Combined1F1B, NothingToOverlapWithoutBothAllToAlls) {
  std::vector<Op> dense = {compute(OpRole::qkv_projection, GemmPass::forward), compute(OpRole::fc1, GemmPass::forward)};
  EXPECT_FALSE(combined_layer_order(dense, backward_layer(), false));
  EXPECT_FALSE(combined_layer_order(forward_layer(), forward_layer(), false));  // backward's order is combine first
}

// Megatron's get_pp_rank_microbatches: one more warm-up forward; with one stage, micro-batch 0's forward alone, then
// forward i + 1 beside backward i.
TEST(Combined1F1B, RunsOneMoreWarmUpForward) {
  const auto one_stage = pipeline_schedule(Schedule::one_f_one_b, 1, 3, 1, true)[0];
  // The steady state's forwards run beside the backward after them; the warm-up's first runs alone.
  const std::vector<ScheduleStep> expected = {{true, 0, 0},       {true, 1, 0, true}, {false, 0, 0},
                                              {true, 2, 0, true}, {false, 1, 0},      {false, 2, 0}};
  EXPECT_EQ(one_stage, expected);
  const auto plain = pipeline_schedule(Schedule::interleaved_1f1b, 2, 4, 2)[1];
  const auto combined = pipeline_schedule(Schedule::interleaved_1f1b, 2, 4, 2, true)[1];
  EXPECT_EQ(peak_in_flight_passes(combined), peak_in_flight_passes(plain) + 1);
  EXPECT_THROW(pipeline_schedule(Schedule::one_f_one_b, 2, 4, 1, true), std::invalid_argument);
}

// A stage whose warm-up takes every forward (as many micro-batches as stages) has no steady state and no pair:
// Megatron runs its last forward and first backward apart. Paired, the forward's activation send waited for the
// backward, whose gradient waited for that activation downstream: the replay deadlocked (Qwen3 235B-A22B's
// layout at 8 micro-batches per pipeline, 2026-12-07).
TEST(Combined1F1B, AStageWhoseWarmUpTakesEveryForwardRunsNoPair) {
  const auto orders = pipeline_schedule(Schedule::interleaved_1f1b, 2, 2, 2, true);
  EXPECT_TRUE(std::none_of(orders[0].begin(), orders[0].end(), [](const ScheduleStep& s) { return s.beside_next; }));
  for (const auto& order : orders)
    for (std::size_t i = 0; i < order.size(); ++i)
      if (order[i].beside_next) {
        ASSERT_LT(i + 1, order.size());
        EXPECT_TRUE(order[i].forward);
        EXPECT_FALSE(order[i + 1].forward);
        EXPECT_NE(order[i + 1].micro_batch, order[i].micro_batch);
      }
}

Scenario overlapped(bool delay_wgrad, std::int64_t global_batch = 32) {
  Scenario sc = testing::make_scenario(testing::moe_shaped(), 2, 1024, global_batch);
  sc.framework.overlap_moe_expert_parallel_comm = true;
  sc.framework.delay_wgrad_compute = delay_wgrad;
  return sc;
}

Strategy completed(const Scenario& sc, Strategy st) {
  EXPECT_EQ(complete_strategy(sc, st), std::nullopt);
  return st;
}

TEST(Combined1F1B, RefusesWhatMegatronRefuses) {
  const Scenario sc = overlapped(false);
  Strategy st = testing::make_strategy(1, 1);
  st.expert_model_parallel_size = 1;
  EXPECT_NE(invalid_reason(sc, completed(sc, st))->find("expert_model_parallel_size > 1"), std::string::npos);
  st.expert_model_parallel_size = 4;
  EXPECT_EQ(invalid_reason(sc, completed(sc, st)), std::nullopt);
  st.recompute = Recompute::full;
  EXPECT_NE(invalid_reason(sc, completed(sc, st))->find("full recompute"), std::string::npos);
  Strategy piped = testing::make_strategy(1, 2);
  piped.expert_model_parallel_size = 4;
  EXPECT_NE(invalid_reason(sc, completed(sc, piped))->find("interleaved-1f1b"), std::string::npos);
  Scenario gathered = sc;
  gathered.framework.moe_token_dispatcher_type = MoeTokenDispatcher::allgather;
  st.recompute = Recompute::none;
  EXPECT_NE(invalid_reason(gathered, completed(gathered, st))->find("alltoall"), std::string::npos);
}

// The same ops as the plain schedule's, and on one stage the engine finishes sooner: the all-to-alls of one
// micro-batch run under the other's compute (EP 8 over two nodes, where the all-to-all is slow), the more so with
// the weight gradients delayed. The extra warm-up forward holds one more micro-batch's activations.
TEST(Combined1F1B, HidesAllToAllsInTheEngine) {
  Strategy st = testing::make_strategy(1, 1);
  st.expert_model_parallel_size = 8;
  Scenario plain = overlapped(false);
  plain.framework.overlap_moe_expert_parallel_comm = false;
  st = completed(plain, st);
  const IterationGraph before = lower_to_op_graphs(plain, st);
  const TimeNs plain_ns = simulate_iteration(before, plain.cluster, builtin_profile()).iteration_ns;
  TimeNs last_ns = plain_ns;
  for (bool delay : {false, true}) {
    const Scenario sc = overlapped(delay);
    ASSERT_EQ(invalid_reason(sc, st), std::nullopt) << st.key();
    const IterationGraph after = lower_to_op_graphs(sc, st);
    EXPECT_EQ(after.classes[0].size(), before.classes[0].size());
    const TimeNs ns = simulate_iteration(after, sc.cluster, builtin_profile()).iteration_ns;
    EXPECT_LT(ns, last_ns) << "delay " << delay;
    last_ns = ns;
  }
  const auto activations = [&](const Scenario& sc) { return estimate_memory(sc, st).per_stage.front().activations; };
  EXPECT_GT(activations(overlapped(false)), activations(plain));
}

// Pipelined (interleaved 1F1B), each stage's combined steps wait for its neighbours' (a stage sends its forward's
// output after the step, as Megatron's post_forward does after the layers): every stage finishes, with the same ops.
TEST(Combined1F1B, InterleavedPipelinesComplete) {
  Strategy st = testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b);
  st.expert_model_parallel_size = 8;
  const Scenario sc = overlapped(true, 64);
  st = completed(sc, st);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  Scenario plain = sc;
  plain.framework.overlap_moe_expert_parallel_comm = plain.framework.delay_wgrad_compute = false;
  const IterationGraph before = lower_to_op_graphs(plain, st), after = lower_to_op_graphs(sc, st);
  const IterationResult r = simulate_iteration(after, sc.cluster, builtin_profile());
  ASSERT_EQ(r.classes.size(), 2u);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(after.classes[c].size(), before.classes[c].size());
    EXPECT_GT(r.classes[c].finish_ns, 0);
    EXPECT_LE(r.classes[c].finish_ns, r.iteration_ns);
  }
}

TEST(Combined1F1B, AsManyMicroBatchesAsStagesComplete) {
  Strategy st = testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b);
  st.expert_model_parallel_size = 8;
  const Strategy at_64 = completed(overlapped(true, 64), st);
  const Scenario sc = overlapped(true, 64 * 2 / at_64.num_micro_batches);
  st = completed(sc, st);
  ASSERT_EQ(st.num_micro_batches, 2);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  const IterationResult r = simulate_iteration(lower_to_op_graphs(sc, st), sc.cluster, builtin_profile());
  ASSERT_EQ(r.classes.size(), 2u);
  for (int c = 0; c < 2; ++c) EXPECT_GT(r.classes[c].finish_ns, 0);
}

// The search prunes by the compute lower bound, which lowers any schedule of separate passes in GPipe's order: a
// combined-1F1B candidate of several micro-batches (1F1B on one stage) is bounded, not refused, and its bound lies
// below its simulated time (a search with the flag and pipeline_model_parallel_size [1] failed on it before).
TEST(Combined1F1B, TheSearchesLowerBoundTakesIt) {
  Strategy st = testing::make_strategy(1, 1);
  st.expert_model_parallel_size = 8;
  const Scenario sc = overlapped(false);
  st = completed(sc, st);
  ASSERT_GT(st.num_micro_batches, 1);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  const TimeNs bound_ns = compute_lower_bound_ns(sc, st, builtin_profile());
  const TimeNs simulated_ns = simulate_iteration(lower_to_op_graphs(sc, st), sc.cluster, builtin_profile()).iteration_ns;
  EXPECT_GT(bound_ns, 0);
  EXPECT_LE(bound_ns, simulated_ns);
}

}  // namespace
}  // namespace twin
