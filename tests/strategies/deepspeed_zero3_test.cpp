// ZeRO-3 as DeepSpeed's stage 3 of 2021 drives it (framework.zero_implementation deepspeed,
// strategies/deepspeed_zero3.hpp): the weights a layer's backward gathers again after its recomputed forward, the
// gradients all-reduced in every micro-batch, and each layer's compute after the synchronisation that waits for the
// reduction before it.
#include <gtest/gtest.h>

#include <vector>

#include "sim/simulate.hpp"
#include "strategies/deepspeed_zero3.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "cost/profile.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

// GPT-3 175B's layer (h 12288, 4h MLP) on one GPU's worth of TP: qkv 3h^2, projection h^2, fc1 and fc2 4h^2.
TEST(DeepSpeedZero3, TheBackwardGathersAgainWhatLiesFurtherThanTheReuseDistance) {
  ModelConfig model = testing::gpt_shaped();
  model.hidden_size = 12288;
  model.ffn_hidden_size = 4 * 12288;
  model.num_attention_heads = 96;
  model.num_query_groups = 96;
  model.kv_channels = 128;
  Scenario scenario = testing::make_scenario(model, 1, 2048, 8);
  Strategy z3 = testing::make_strategy(1, 1, 1, false);
  z3.zero_stage = 3;
  z3.micro_batch_size = 1;
  ASSERT_EQ(complete_strategy(scenario, z3), std::nullopt);
  const std::int64_t h2 = std::int64_t{12288} * 12288;
  // fc2's backward follows its recomputed forward at once; fc1 waits for fc2's 2 x 4h^2 = 1.2e9 elements, more than
  // 1e9: fc1, the projection and qkv are gathered again.
  EXPECT_EQ(lowering::deepspeed_regathered_elements(lowering::rank_shapes(scenario, z3), false), 8 * h2);
  // At h 2048 every reuse lies within 1e9 elements: nothing is gathered twice.
  Scenario small = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);
  EXPECT_EQ(lowering::deepspeed_regathered_elements(lowering::rank_shapes(small, z3), false), 0);
}

struct Lowered {
  Scenario scenario;
  Strategy strategy;
  IterationGraph graph;
};

Lowered lower(ZeroImplementation implementation, std::int64_t hidden);

// The live-parameter cap (stage3_max_live_parameters, 1e9 elements): a hook holding that many prefetches nothing, and
// the next weight is gathered on demand. GPT-3 174.6B's weights (h 12288: at most 4h^2 = 6.0e8) never reach it.
TEST(DeepSpeedZero3, AHookHoldingTheLiveParameterCapPrefetchesNothing) {
  const auto gathers = [](std::int64_t hidden, bool backward) {
    const Lowered lowered = lower(ZeroImplementation::deepspeed, hidden);
    return lowering::deepspeed_layer_gathers(lowering::rank_shapes(lowered.scenario, lowered.strategy), false,
                                             backward, true);
  };
  const std::int64_t h2 = std::int64_t{12288} * 12288;
  EXPECT_EQ(gathers(12288, false).on_demand_elements, 0);
  EXPECT_EQ(gathers(12288, false).prefetched_elements, 12 * h2);
  EXPECT_EQ(gathers(12288, true).on_demand_elements, 0);
  EXPECT_EQ(gathers(12288, true).prefetched_elements, (12 + 8) * h2);
  // 529.6B (h 20480): qkv 3h^2 = 1.26e9, fc1 and fc2 4h^2 = 1.68e9 hold the cap, the projection (4.2e8) does not.
  // Forward: only fc1, after the projection, is prefetched. Backward: the recomputed forward as the forward; then
  // fc1 after fc2 (cap held) and the projection after fc1 on demand, qkv after the projection prefetched.
  const std::int64_t w2 = std::int64_t{20480} * 20480;
  EXPECT_EQ(gathers(20480, false).prefetched_elements, 4 * w2);
  EXPECT_EQ(gathers(20480, false).on_demand_elements, 8 * w2);
  EXPECT_EQ(gathers(20480, true).prefetched_elements, (4 + 3) * w2);
  EXPECT_EQ(gathers(20480, true).on_demand_elements, (8 + 4 + 1) * w2);
}


// The memory model's ZeRO-3 gather buffers under DeepSpeed: what the hooks hold at once (a weight, those kept for a
// later use, the one prefetched), not two whole layers. h 12288: fc1 (4h^2, under the cap) prefetches fc2, 8h^2 live;
// h 20480: only the projection (h^2) prefetches, fc1 beside it, 5h^2; fc1 and fc2 (4h^2) are the largest weights.
TEST(DeepSpeedZero3, TheLiveParameterCapBoundsTheWeightsHeldGathered) {
  for (const auto& [hidden, peak] : {std::pair{std::int64_t{12288}, 8}, std::pair{std::int64_t{20480}, 5}}) {
    const Lowered lowered = lower(ZeroImplementation::deepspeed, hidden);
    const lowering::RankShapes shapes = lowering::rank_shapes(lowered.scenario, lowered.strategy);
    EXPECT_EQ(lowering::deepspeed_peak_gathered_elements(shapes, false, true), peak * hidden * hidden) << hidden;
    EXPECT_EQ(lowering::deepspeed_largest_weight_elements(shapes, false), 4 * hidden * hidden) << hidden;
  }
  // The whole configuration (Narayanan et al.'s 529.6B on 640 GPUs, micro-batch 4) is the validation table's row
  // narayanan21_t2_zero3_529.6B_640gpu: it fits since DeepSpeed's gathers are counted so (82.0 GiB before).
}

Lowered lower(ZeroImplementation implementation, std::int64_t hidden) {
  ModelConfig model = testing::gpt_shaped();
  model.num_layers = 4;
  model.hidden_size = hidden;
  model.ffn_hidden_size = 4 * hidden;
  model.num_attention_heads = static_cast<int>(hidden / 128);  // GPT-3's head width
  model.num_query_groups = model.num_attention_heads;
  Scenario scenario = testing::make_scenario(model, 2, 2048, 64);  // 16 GPUs, 4 micro-batches of 1
  scenario.cluster.node_groups[0].gpu = *gpu_preset("H100-SXM-80GB");
  scenario.framework.zero_implementation = implementation;
  Strategy z3 = testing::make_strategy(1, 1, 1, false);
  z3.zero_stage = 3;
  z3.micro_batch_size = 1;
  z3.recompute = Recompute::full;
  EXPECT_EQ(complete_strategy(scenario, z3), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, z3), std::nullopt);
  IterationGraph graph = lower_to_op_graphs(scenario, z3);
  check_well_formed(graph);
  return {scenario, z3, std::move(graph)};
}

int count(const IterationGraph& g, OpRole role, OpKind kind) {
  int n = 0;
  for (const RankClass& rc : g.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) n += rc.op(i).role == role && rc.op(i).kind == kind ? 1 : 0;
  return n;
}

TEST(DeepSpeedZero3, GradientsAreAllReducedInEveryMicroBatch) {
  const Lowered megatron = lower(ZeroImplementation::megatron, 2048);
  const Lowered deepspeed = lower(ZeroImplementation::deepspeed, 2048);
  ASSERT_EQ(deepspeed.strategy.num_micro_batches, 4);
  const int units = 4 + 2;  // layers, embedding, output layer (tied: its own unit on the one stage)
  // Both reduce in every micro-batch (ZeRO-3 keeps only its gradient shard); Megatron-FSDP reduce-scatters.
  EXPECT_EQ(count(megatron.graph, OpRole::grad_reduce, OpKind::reduce_scatter), 4 * units);
  EXPECT_EQ(count(megatron.graph, OpRole::grad_reduce, OpKind::all_reduce), 0);
  EXPECT_EQ(count(deepspeed.graph, OpRole::grad_reduce, OpKind::all_reduce), 4 * units);
  EXPECT_EQ(count(deepspeed.graph, OpRole::grad_reduce, OpKind::reduce_scatter), 0);
  // At h 2048 nothing is gathered twice: the gathers are Megatron's, one per unit and pass.
  EXPECT_EQ(count(deepspeed.graph, OpRole::param_gather, OpKind::all_gather),
            count(megatron.graph, OpRole::param_gather, OpKind::all_gather));
  const Profile profile = builtin_profile();
  EXPECT_GT(simulate_iteration(deepspeed.graph, deepspeed.scenario.cluster, profile).iteration_ns, 0);
}

TEST(DeepSpeedZero3, ALayersComputeWaitsForTheReductionBeforeIt) {
  const Lowered deepspeed = lower(ZeroImplementation::deepspeed, 2048);
  const Lowered megatron = lower(ZeroImplementation::megatron, 2048);
  // A backward compute op (the recomputed forward included) that waits (an edge, not stream order) on a gradient
  // reduction: the first of each backward unit after the first of a micro-batch under DeepSpeed; never under
  // Megatron, whose reductions only feed the optimizer.
  const auto waits_on_reduction = [](const IterationGraph& g) {
    int n = 0;
    for (const RankClass& rc : g.classes)
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        if (op.stream != Stream::compute || (op.phase != Phase::backward && !op.recomputed)) continue;
        for (auto [e, end] = boost::in_edges(i, rc.graph); e != end; ++e)
          n += rc.op(boost::source(*e, rc.graph)).role == OpRole::grad_reduce ? 1 : 0;
      }
    return n;
  };
  EXPECT_EQ(waits_on_reduction(megatron.graph), 0);
  EXPECT_EQ(waits_on_reduction(deepspeed.graph), 4 * (4 + 2 - 1));
}

TEST(DeepSpeedZero3, AWideLayerIsGatheredAgainForItsBackward) {
  const Lowered megatron = lower(ZeroImplementation::megatron, 12288);
  const Lowered deepspeed = lower(ZeroImplementation::deepspeed, 12288);
  // One more gather per layer and micro-batch: 8 h^2 elements of fp16 after the recomputed forward's 12 h^2.
  EXPECT_EQ(count(deepspeed.graph, OpRole::param_gather, OpKind::all_gather),
            count(megatron.graph, OpRole::param_gather, OpKind::all_gather) + 4 * 4);
  const std::int64_t h2 = std::int64_t{12288} * 12288;
  int again = 0;
  for (const RankClass& rc : deepspeed.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      again += rc.op(i).role == OpRole::param_gather && rc.op(i).bytes == 8 * h2 * 2 ? 1 : 0;
  EXPECT_EQ(again, 4 * 4);
}

// The cap moves gathers, it does not add any: the bytes gathered are the same; at h 20480 part of each unit's are
// gathered after the compute before it (an edge from a compute op), at h 12288 none.
TEST(DeepSpeedZero3, OnDemandGathersWaitForTheComputeBeforeThem) {
  const auto gathers = [](const IterationGraph& g) {
    std::int64_t bytes = 0;
    int after_compute = 0;
    for (const RankClass& rc : g.classes)
      for (OpIndex i = 0; i < rc.size(); ++i) {
        if (rc.op(i).role != OpRole::param_gather || rc.op(i).kind != OpKind::all_gather) continue;
        bytes += rc.op(i).bytes;
        for (auto [e, end] = boost::in_edges(i, rc.graph); e != end; ++e)
          after_compute += rc.op(boost::source(*e, rc.graph)).stream == Stream::compute ? 1 : 0;
      }
    return std::pair{bytes, after_compute};
  };
  const auto [wide_bytes, wide_after] = gathers(lower(ZeroImplementation::deepspeed, 20480).graph);
  const auto [narrow_bytes, narrow_after] = gathers(lower(ZeroImplementation::deepspeed, 12288).graph);
  EXPECT_GT(wide_after, narrow_after);
  const Lowered megatron = lower(ZeroImplementation::megatron, 20480);
  const std::int64_t w2 = std::int64_t{20480} * 20480;
  // DeepSpeed's backward also gathers again what it released (8 h^2, fp16) for each layer and micro-batch.
  EXPECT_EQ(wide_bytes, gathers(megatron.graph).first + 4 * 4 * 8 * w2 * 2);
  EXPECT_GT(narrow_bytes, 0);
}

// The host's loops (strategies/deepspeed_zero3.hpp): every parameter all-gather carries 13.2 us per rank of its group
// for each weight it fetches; a layer fetches 11 weights per micro-batch under full recompute at h >= 11,180 (four
// in the forward, four for the recomputed forward, three again for their backward), however the live-parameter cap
// splits them between prefetched and on-demand gathers; the embedding its word and position tables, the head its
// output weights, in each pass. Megatron's ZeRO-3 queues its launches ahead: no host time.
TEST(DeepSpeedZero3, EveryParameterGatherCarriesTheHostLoopsOfTheWeightsItFetches) {
  const auto host_ns = [](const IterationGraph& g) {
    TimeNs total = 0;
    for (const RankClass& rc : g.classes)
      for (OpIndex i = 0; i < rc.size(); ++i) {
        EXPECT_TRUE(rc.op(i).host_ns == 0 || rc.op(i).role == OpRole::param_gather) << op_name(rc.op(i));
        total += rc.op(i).host_ns;
      }
    return total;
  };
  EXPECT_EQ(host_ns(lower(ZeroImplementation::megatron, 12288).graph), 0);
  for (std::int64_t hidden : {12288, 20480}) {
    const Lowered deepspeed = lower(ZeroImplementation::deepspeed, hidden);
    ASSERT_EQ(deepspeed.graph.classes.size(), 1u);
    const int embedding_weights = deepspeed.scenario.model.position_embedding_rope ? 1 : 2;
    const int weights_per_micro_batch = 4 * 11 + 2 * (embedding_weights + 1);
    EXPECT_EQ(host_ns(deepspeed.graph),
              deepspeed.strategy.num_micro_batches * weights_per_micro_batch *
                  lowering::deepspeed_gather_host_ns(1, deepspeed.strategy.data_parallel_size))
        << hidden;
  }
  EXPECT_EQ(lowering::deepspeed_gather_host_ns(3, 1536), TimeNs{3} * 1536 * 13200);
}

// DeepSpeed's memory passes around its collectives (strategies/deepspeed_zero3.hpp), on the data-parallel stream:
// after each weight all-gather, the zeros and the copy out of the list all_gather's flat buffer (6 bytes per 16-bit
// element gathered); before each gradient all-reduce the flatten and the division (8), after it the copy back (4).
// Megatron's ZeRO-3 gathers and reduce-scatters in place: no such pass.
TEST(DeepSpeedZero3, EveryCollectiveCarriesItsMemoryPasses) {
  struct Passes {
    std::int64_t gathered = 0, reduced = 0, gather_copies = 0, reduce_copies = 0;
    int reductions_between_copies = 0;
  };
  const auto passes = [](const IterationGraph& g) {
    Passes p;
    for (const RankClass& rc : g.classes) {
      std::vector<const Op*> stream;  // the data-parallel stream's ops in the order they were issued
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (rc.op(i).stream == Stream::dp_comm) stream.push_back(&rc.op(i));
      const auto is_reduce_copy = [&](std::size_t k) {
        return k < stream.size() && stream[k]->kind == OpKind::elementwise && stream[k]->role == OpRole::grad_reduce;
      };
      for (std::size_t k = 0; k < stream.size(); ++k) {
        const Op& op = *stream[k];
        const bool copy = op.kind == OpKind::elementwise;
        if (op.role == OpRole::param_gather && copy) p.gather_copies += op.bytes;
        if (op.role == OpRole::param_gather && op.kind == OpKind::all_gather) p.gathered += op.bytes;
        if (op.role == OpRole::grad_reduce && copy) p.reduce_copies += op.bytes;
        if (op.role != OpRole::grad_reduce || op.kind != OpKind::all_reduce) continue;
        p.reduced += op.bytes;
        p.reductions_between_copies += k > 0 && is_reduce_copy(k - 1) && is_reduce_copy(k + 1) ? 1 : 0;
      }
    }
    return p;
  };
  const Passes megatron = passes(lower(ZeroImplementation::megatron, 12288).graph);
  EXPECT_EQ(megatron.gather_copies, 0);
  EXPECT_EQ(megatron.reduce_copies, 0);
  const Passes deepspeed = passes(lower(ZeroImplementation::deepspeed, 12288).graph);
  ASSERT_GT(deepspeed.gathered, 0);
  EXPECT_EQ(deepspeed.gather_copies, deepspeed.gathered / 2 * lowering::kDeepSpeedGatherCopyBytesPerElement);
  // 16-bit gradients: the all-reduce's bytes are 2 per element.
  EXPECT_EQ(deepspeed.reduce_copies, deepspeed.reduced / 2 *
                                         (lowering::kDeepSpeedReduceCopyInBytesPerElement +
                                          lowering::kDeepSpeedReduceCopyOutBytesPerElement));
  EXPECT_EQ(deepspeed.reductions_between_copies, count(lower(ZeroImplementation::deepspeed, 12288).graph,
                                                       OpRole::grad_reduce, OpKind::all_reduce));
}

}  // namespace
}  // namespace twin
