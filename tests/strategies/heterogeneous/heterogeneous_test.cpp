// The heterogeneous family: min-max layer and micro-batch assignment against hand-solved cases, TP
// groups and pipeline layouts, gradient segments and their bytes in closed form, the engine's transfers
// between classes of different sizes, and the mechanism: an asymmetric plan on a mixed cluster beats
// the best uniform plan that cluster allows.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/scenario.hpp"
#include "sim/simulate.hpp"
#include "strategies/families/families.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/heterogeneous/heterogeneous_search.hpp"

namespace twin {
namespace {

Scenario load(const char* name) { return load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/" + name); }

TEST(HeterogeneousAssign, LayersGoToTheFasterStageUntilTimesMeet) {
  // Stage 1 is 3x slower: (8, 2) gives max(8, 6) = 8; (7, 3) gives 9, (9, 1) gives 9.
  EXPECT_EQ(assign_layers(10, {1.0, 3.0}, {0, 0}, {10, 10}), (std::vector<int>{8, 2}));
  // The embedding and loss on the stages count too: extra 4 on stage 0 -> (6, 4): max(10, 12)? No:
  // (7, 3) gives max(11, 9) = 11, (6, 4) gives max(10, 12) = 12, (8, 2) gives max(12, 6) = 12.
  EXPECT_EQ(assign_layers(10, {1.0, 3.0}, {4.0, 0}, {10, 10}), (std::vector<int>{7, 3}));
  // Memory caps the fast stage at 5 layers: the rest must go to the slow one.
  EXPECT_EQ(assign_layers(10, {1.0, 3.0}, {0, 0}, {5, 10}), (std::vector<int>{5, 5}));
  EXPECT_TRUE(assign_layers(10, {1.0, 3.0}, {0, 0}, {3, 3}).empty());
  EXPECT_TRUE(assign_layers(1, {1.0, 1.0}, {0, 0}, {5, 5}).empty());
}

TEST(HeterogeneousAssign, MicroBatchesBalanceFillSteadyStateAndDrain) {
  // 8 micro-batches, pipeline 1 three times slower: (6, 2) -> max(6, 6).
  EXPECT_EQ(assign_micro_batches(8, {1.0, 3.0}, {1, 1}), (std::vector<int>{6, 2}));
  // A 3-stage pipeline pays 2 extra micro-batch times for its fill and drain: (m0 + 2) vs m1.
  // 10 micro-batches at equal speed: (4, 6) -> max(6, 6).
  EXPECT_EQ(assign_micro_batches(10, {1.0, 1.0}, {3, 1}), (std::vector<int>{4, 6}));
  EXPECT_TRUE(assign_micro_batches(1, {1.0, 1.0}, {1, 1}).empty());
}

TEST(HeterogeneousPartition, TensorGroupsStayInNodesAndPipelinesDealKinds) {
  const Scenario sc = load("mixed-h100-a100-llama2-13b.json");
  const std::vector<TpGroup> groups = tensor_parallel_groups(sc.cluster, {4, 8});
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].devices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(groups[1].devices, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(groups[2].devices.front(), 8);
  EXPECT_EQ(groups[2].node_group, 1);
  EXPECT_EQ(groups[2].node, 1);

  const auto split = split_pipelines(sc.cluster, groups, {2, 1});
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[0].size(), 1u);
  EXPECT_EQ(split[2][0].devices.front(), 8);
  EXPECT_TRUE(split_pipelines(sc.cluster, groups, {4, 1}).empty());  // 2 H100 groups cannot make 4

  const auto mixed = mixed_pipelines(sc.cluster, groups, 1);
  ASSERT_EQ(mixed.size(), 1u);
  ASSERT_EQ(mixed[0].size(), 3u);
  EXPECT_EQ(mixed[0][0].node_group, 0);  // 80 GB stages first: they keep the most micro-batches
  EXPECT_EQ(mixed[0][2].node_group, 1);
  EXPECT_TRUE(mixed_pipelines(sc.cluster, groups, 2).empty());  // one A100 group cannot be dealt to 2

  const auto mixed2 = mixed_pipelines(sc.cluster, tensor_parallel_groups(sc.cluster, {2, 2}), 4);
  ASSERT_EQ(mixed2.size(), 4u);
  EXPECT_EQ(mixed2[1][0].devices.front(), 2);  // round-robin: H100 group 1 and A100 group 1
  EXPECT_EQ(mixed2[1][1].devices.front(), 10);
}

TEST(HeterogeneousReduction, SegmentsFollowEveryPipelinesCutsAndBytesAreTheShards) {
  const Scenario sc = load("mixed-h100-a100-fixed-plan.json");
  ASSERT_EQ(sc.pipelines.size(), 2u);
  const std::vector<GradientSegment> segments = gradient_segments(sc.model, sc.pipelines);
  // Pipeline 0 is one stage; pipeline 1 cuts after layer 25: units [-1, 26) and [26, 41).
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].first_unit, -1);
  EXPECT_EQ(segments[0].end_unit, 26);
  EXPECT_EQ(segments[1].end_unit, 41);
  EXPECT_EQ(segments[1].stage_of_pipeline, (std::vector<int>{0, 1}));
  // llama2-13b, h 5120, ffn 13824: a layer has 4h^2 + 3h*ffn TP-sharded weights and 2h norm weights;
  // the vocabulary pads to 32256 at tp 4 (multiple of 128*4). Per GPU at tp 4, bf16 gradients:
  const std::int64_t h = 5120, ffn = 13824;
  const std::int64_t layer_tp4 = (4 * h * h + 3 * h * ffn) / 4 + 2 * h;
  const std::int64_t embedding_tp4 = 32256 * h / 4;
  EXPECT_EQ(segment_gradient_bytes(sc.model, segments[0], 4, false), 2 * (embedding_tp4 + 26 * layer_tp4));
  // A ring over 2 pipelines moves half a shard per step, 2 steps: the shard, as a 2-rank all-reduce does.
  EXPECT_EQ(ring_step_bytes(2 * (embedding_tp4 + 26 * layer_tp4), 2), embedding_tp4 + 26 * layer_tp4);
  // On a tp 8 stage: layers, the output projection (vocabulary padded to a multiple of 8*128: 32768)
  // and the final norm.
  const std::int64_t layer_tp8 = (4 * h * h + 3 * h * ffn) / 8 + 2 * h;
  EXPECT_EQ(segment_gradient_bytes(sc.model, segments[1], 8, false), 2 * (14 * layer_tp8 + 32768 * h / 8 + h));
}

TEST(HeterogeneousLowering, StagesRunOnTheirOwnKindAndRingsMoveEachSidesBytes) {
  const Scenario sc = load("mixed-h100-a100-fixed-plan.json");
  const IterationGraph graph = lower_asymmetric_plan(sc, *sc.strategy, sc.pipelines);
  ASSERT_EQ(graph.classes.size(), 3u);
  EXPECT_EQ(graph.classes[0].node_group, 0);
  EXPECT_EQ(graph.classes[1].node_group, 0);
  EXPECT_EQ(graph.classes[2].node_group, 1);
  EXPECT_EQ(graph.classes[2].num_ranks, 8);
  // Class 2 (tp 8, units [26, 41)) sends to and receives from class 0 (tp 4, the whole model) in
  // pipeline order; each op carries its own class's bytes per GPU.
  const auto segments = gradient_segments(sc.model, sc.pipelines);
  std::int64_t sent = 0, received = 0;
  for (OpIndex i = 0; i < graph.classes[2].size(); ++i) {
    const Op& op = graph.classes[2].op(i);
    if (op.group != GroupKind::data) continue;
    EXPECT_EQ(op.peer, 0);
    (op.kind == OpKind::send ? sent : received) += op.bytes;
  }
  const Bytes shard = segment_gradient_bytes(sc.model, segments[1], 8, false);
  EXPECT_EQ(sent, 2 * ring_step_bytes(shard, 2));  // reduce-scatter + all-gather, one step each
  EXPECT_EQ(received, sent);
  // The simulation runs end to end (every transfer matched, no deadlock).
  const IterationResult result = simulate_iteration(graph, sc.cluster, builtin_profile());
  EXPECT_GT(result.iteration_ns, 0);
  // Each stage's optimizer step reads the main gradient in the framework's dtype.
  Scenario fp32 = sc;
  fp32.framework.main_grad_dtype_bytes = 4;
  int steps = 0;
  for (const RankClass& rc : lower_asymmetric_plan(fp32, *fp32.strategy, fp32.pipelines).classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).kind == OpKind::optimizer_step) {
        EXPECT_EQ(rc.op(i).main_gradient_bytes, 4);
        ++steps;
      }
  EXPECT_EQ(steps, 3);
}

// A transfer between classes of different sizes: the receiver's side moves its own (larger) bytes per
// GPU, so with the receiver's bytes doubled the bandwidth part of the time doubles.
TEST(HeterogeneousEngine, TransferBetweenClassesOfDifferentSizesMovesEachSidesBytes) {
  const Scenario sc = load("mixed-h100-a100-fixed-plan.json");
  auto transfer_ns = [&](Bytes send_bytes, Bytes recv_bytes) {
    IterationGraph graph;
    graph.classes.resize(2);
    for (int c = 0; c < 2; ++c) {
      RankClass& rc = graph.classes[c];
      rc.index = c;
      rc.num_ranks = c == 0 ? 8 : 4;
      rc.first_rank = c == 0 ? 8 : 0;  // A100 node sends to the H100 node: over the network
      rc.node_group = c == 0 ? 1 : 0;
      Op op;
      op.kind = c == 0 ? OpKind::send : OpKind::recv;
      op.stream = c == 0 ? Stream::pp_send : Stream::pp_recv;
      op.group = GroupKind::data;
      op.bytes = c == 0 ? send_bytes : recv_bytes;
      op.peer = 1 - c;
      op.p2p_tag = 0;
      rc.add(op);
    }
    return simulate_iteration(graph, sc.cluster, builtin_profile()).iteration_ns;
  };
  const Bytes gib = Bytes{1} << 30;
  const TimeNs equal = transfer_ns(gib, gib);
  const TimeNs latency = transfer_ns(1, 1);
  // The A100 node's NICs (25 GB/s per GPU) are slower than the H100 node's (50 GB/s): with equal bytes
  // the sender is the bottleneck; at 4x the bytes on the receiver (50 GB/s), the receiver is: 2x the time.
  const TimeNs receiver_bound = transfer_ns(gib, 4 * gib);
  EXPECT_NEAR(static_cast<double>(receiver_bound - latency) / (equal - latency), 2.0, 0.02);
  EXPECT_EQ(transfer_ns(gib, gib / 2), equal);  // fewer bytes on the faster side: the sender still bounds it
}

// The test: on 8 H100 + 8 A100-40GB, the best asymmetric plan beats the best uniform plan.
TEST(HeterogeneousSearch, AsymmetricPlanBeatsTheBestUniformPlanOnAMixedCluster) {
  const Scenario sc = load("mixed-h100-a100-llama2-13b.json");
  const std::vector<Candidate> ranked = search(sc, builtin_profile(), plan_families(), SearchOptions{2, {}});
  const auto best_of = [&](const std::string& family) {
    auto it = std::find_if(ranked.begin(), ranked.end(),
                           [&](const Candidate& c) { return c.feasible && c.family() == family; });
    return it == ranked.end() ? nullptr : &*it;
  };
  const Candidate* uniform = best_of("uniform");
  const Candidate* hetero = best_of("heterogeneous");
  ASSERT_NE(uniform, nullptr);
  ASSERT_NE(hetero, nullptr);
  EXPECT_EQ(ranked.front().family(), "heterogeneous");
  EXPECT_GT(hetero->throughput.tokens_per_s, 1.3 * uniform->throughput.tokens_per_s);
  // The winner gives the H100 stages more layers than the A100 stages.
  const AsymmetricPlan& plan = *hetero->plan_as<AsymmetricPlan>();
  int h100_layers = 0, a100_layers = 0;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p)
    for (std::size_t s = 0; s < plan.pipelines[p].stages.size(); ++s)
      (plan.stage_gpus[p][s] == "H100-SXM-80GB" ? h100_layers : a100_layers) += plan.pipelines[p].stages[s].num_layers;
  EXPECT_GT(h100_layers, a100_layers);
  // Deterministic whatever the number of threads.
  const std::vector<Candidate> again = search(sc, builtin_profile(), plan_families(), SearchOptions{1, {}});
  ASSERT_EQ(again.size(), ranked.size());
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    EXPECT_EQ(again[i].key(), ranked[i].key());
    EXPECT_EQ(again[i].result.iteration_ns, ranked[i].result.iteration_ns);
  }
}

TEST(HeterogeneousSearch, FixedPlanIsSimulatedAsGiven) {
  const Scenario sc = load("mixed-h100-a100-fixed-plan.json");
  const std::vector<Candidate> ranked = search(sc, builtin_profile(), plan_families(), SearchOptions{1, {}});
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_TRUE(ranked[0].feasible) << ranked[0].infeasible_reason;
  EXPECT_EQ(ranked[0].family(), "heterogeneous");
  EXPECT_EQ(ranked[0].key(), asymmetric_plan_key(*sc.strategy, sc.pipelines));
  IterationGraph graph;
  const Candidate again = evaluate_again(sc, builtin_profile(), ranked[0], true, &graph);
  EXPECT_EQ(again.result.iteration_ns, ranked[0].result.iteration_ns);
  EXPECT_EQ(graph.classes.size(), 3u);
}

}  // namespace
}  // namespace twin
