// An MoE layer's lowering: routed shapes per layer from the routing model, and the two token dispatchers.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "strategies/lowering.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::make_scenario;
using testing::make_strategy;

RoutingModel routing(RoutingDistribution distribution, double exponent = 0) {
  RoutingModel r;
  r.distribution = distribution;
  r.exponent = exponent;
  return r;
}

Strategy expert_parallel(const Scenario& sc, int ep) {
  Strategy st = make_strategy(1, 1);
  st.expert_model_parallel_size = ep;
  EXPECT_EQ(complete_strategy(sc, st), std::nullopt);
  EXPECT_EQ(invalid_reason(sc, st), std::nullopt) << st.key();
  return st;
}

std::vector<const Op*> ops_of(const RankClass& rc, const std::function<bool(const Op&)>& wanted) {
  std::vector<const Op*> found;
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (wanted(rc.op(i))) found.push_back(&rc.op(i));
  return found;
}

// The test model at EP 4 lowered with the alltoall dispatcher and with another: the scenario (set to the other), its
// strategy and the two graphs.
constexpr int kDispatcherEp = 4;
struct Dispatchers {
  Scenario sc;
  Strategy st;
  IterationGraph alltoall, other;
};
Dispatchers lowered_with(MoeTokenDispatcher dispatcher) {
  Dispatchers d{make_scenario(testing::moe_shaped(), 1, 1024, 16), {}, {}, {}};
  d.alltoall = lower_to_op_graphs(d.sc, expert_parallel(d.sc, kDispatcherEp));
  d.sc.framework.moe_token_dispatcher_type = dispatcher;
  d.st = expert_parallel(d.sc, kDispatcherEp);
  d.other = lower_to_op_graphs(d.sc, d.st);
  return d;
}

// A measured routing skewed in layer 1 only: layer 1's experts compute more rows and its all-to-alls move more.
TEST(LoweringMoe, EachLayerIsPricedByItsOwnRouting) {
  Scenario sc = make_scenario(testing::moe_shaped(), 1, 1024, 16);
  RoutingModel measured = routing(RoutingDistribution::measured);
  measured.histograms = {{0, std::vector<std::int64_t>(8, 100)}, {1, {800, 0, 0, 0, 0, 0, 0, 0}}};
  sc.model.moe.routing = measured;
  const Strategy st = expert_parallel(sc, 2);
  const lowering::RankShapes shapes = lowering::rank_shapes(sc, st);
  EXPECT_GT(shapes.moe_layer(1).expert_tokens, shapes.moe_layer(0).expert_tokens * 3 / 2);
  EXPECT_GT(shapes.moe_layer(1).dispatch_bytes, shapes.moe_layer(0).dispatch_bytes * 3 / 2);
  EXPECT_GT(shapes.moe_layer(1).busiest_expert_tokens, shapes.moe_layer(1).expert_tokens);  // one hot expert of 4
  const IterationGraph g = lower_to_op_graphs(sc, st);
  for (int layer : {0, 1}) {
    const auto a2a = ops_of(g.classes[0], [&](const Op& op) { return op.kind == OpKind::all_to_all && op.layer == layer; });
    ASSERT_FALSE(a2a.empty());
    for (const Op* op : a2a) EXPECT_EQ(op->bytes, shapes.moe_layer(layer).dispatch_bytes) << layer;
  }
  // Layers 2 and 3, which the run did not measure, take every measured layer pooled: alike.
  EXPECT_EQ(shapes.moe_layer(2), shapes.moe_layer(3));
}

// The all-gather dispatcher gathers the EP group's tokens and routing, and reduce-scatters the output: no
// all-to-all, the same expert GEMMs, its permutes over the copies the rank's experts hold.
TEST(LoweringMoe, AllGatherDispatcherGathersAndReduceScatters) {
  const Dispatchers d = lowered_with(MoeTokenDispatcher::allgather);
  const Scenario& sc = d.sc;
  const Strategy& st = d.st;
  const IterationGraph& alltoall = d.alltoall;
  const int ep = kDispatcherEp;
  const RankClass& rc = d.other.classes[0];
  const auto expert_group = [](OpKind kind) {
    return [kind](const Op& op) { return op.kind == kind && op.group == GroupKind::expert; };
  };
  const int layers = 4;
  EXPECT_TRUE(ops_of(rc, expert_group(OpKind::all_to_all)).empty());
  // Forward: routing and tokens gathered; backward: the output gradient gathered. One of each reduce-scatter.
  EXPECT_EQ(ops_of(rc, expert_group(OpKind::all_gather)).size(), 3u * layers * st.num_micro_batches);
  EXPECT_EQ(ops_of(rc, expert_group(OpKind::reduce_scatter)).size(), 2u * layers * st.num_micro_batches);
  const lowering::RankShapes s = lowering::rank_shapes(sc, st);
  for (const Op* op : ops_of(rc, expert_group(OpKind::reduce_scatter))) EXPECT_EQ(op->bytes, ep * s.tokens_local * s.h * 2);
  const auto gemm_rows = [](const RankClass& c) {
    double sum = 0;
    for (const Op* op : ops_of(c, [](const Op& o) { return o.kind == OpKind::gemm && o.role == OpRole::expert_fc1; }))
      sum += op->flops;
    return sum;
  };
  EXPECT_DOUBLE_EQ(gemm_rows(rc), gemm_rows(alltoall.classes[0]));
  for (const Op* op : ops_of(rc, [](const Op& o) { return o.kind == OpKind::moe_permute; }))
    EXPECT_EQ(op->bytes, 2 * s.moe_layer(0).expert_tokens * s.experts_local * s.h * 2);
}

// The flex dispatcher (DeepEP, HybridEP) exchanges the rank's tokens rather than their copies, and its all-to-alls
// carry the routing the simulator deduplicates by; everything else is alltoall's, op for op.
TEST(LoweringMoe, FlexDispatcherExchangesTokensWithTheirRouting) {
  const Dispatchers d = lowered_with(MoeTokenDispatcher::flex);
  const Scenario& sc = d.sc;
  const Strategy& st = d.st;
  const IterationGraph& alltoall = d.alltoall;
  const IterationGraph& g = d.other;
  const lowering::RankShapes s = lowering::rank_shapes(sc, st);
  ASSERT_EQ(g.classes[0].size(), alltoall.classes[0].size());
  int exchanges = 0;
  for (OpIndex i = 0; i < g.classes[0].size(); ++i) {
    const Op& op = g.classes[0].op(i);
    const Op& plain = alltoall.classes[0].op(i);
    ASSERT_EQ(op.kind, plain.kind);
    if (op.kind != OpKind::all_to_all) {
      EXPECT_EQ(op.bytes, plain.bytes);
      continue;
    }
    ++exchanges;
    EXPECT_EQ(op.bytes, plain.bytes / s.top_k);
    EXPECT_EQ(op.dispatch_top_k, sc.model.moe.top_k);
    EXPECT_EQ(op.dispatch_experts, sc.model.moe.num_experts);
    EXPECT_EQ(plain.dispatch_experts, 0);
    // The alltoall dispatcher sends one block per (peer, local expert); the flex dispatcher's kernels are its own.
    EXPECT_EQ(plain.blocks_per_peer, s.experts_local);
    EXPECT_GT(s.experts_local, 1);
    EXPECT_EQ(op.blocks_per_peer, 1);
  }
  EXPECT_EQ(exchanges, 4 * 4 * st.num_micro_batches);  // dispatch and combine, forward and backward, per layer
}

// twin execute's exchange sends one block per (peer, local expert); Megatron-Core's and PyTorch's all_to_all_single
// one per peer, which the op says (the simulator prices blocks from the profile's all-to-all tables in blocks).
TEST(LoweringMoe, TheExchangeSaysItsBlocksPerPeerByFramework) {
  Scenario sc = make_scenario(testing::moe_shaped(), 1, 1024, 16);
  const auto blocks = [](const Scenario& scenario) {
    std::set<int> seen;
    const IterationGraph g = lower_to_op_graphs(scenario, expert_parallel(scenario, kDispatcherEp));
    for (const Op* op : ops_of(g.classes[0], [](const Op& o) { return o.kind == OpKind::all_to_all; }))
      seen.insert(op->blocks_per_peer);
    return seen;
  };
  const int local = sc.model.moe.num_experts / kDispatcherEp;
  ASSERT_GT(local, 1);
  EXPECT_EQ(blocks(sc), std::set<int>{local});  // no framework named: twin execute's
  sc.framework.name = FrameworkName::twin;
  EXPECT_EQ(blocks(sc), std::set<int>{local});
  for (const FrameworkName torch : {FrameworkName::megatron_core, FrameworkName::pytorch_fsdp2}) {
    sc.framework.name = torch;
    EXPECT_EQ(blocks(sc), std::set<int>{1}) << to_string(torch);
  }
}

// Forced balance draws each micro-batch's busiest rank above the mean; a balanced routing does not.
TEST(LoweringMoe, ForcedBalanceIsAboveTheBalancedMean) {
  Scenario sc = make_scenario(testing::moe_shaped(), 1, 1024, 16);
  const lowering::RankShapes balanced = lowering::rank_shapes(sc, expert_parallel(sc, 4));
  sc.model.moe.routing = routing(RoutingDistribution::forced);
  const lowering::RankShapes forced = lowering::rank_shapes(sc, expert_parallel(sc, 4));
  EXPECT_GT(forced.moe_layer(0).expert_tokens, balanced.moe_layer(0).expert_tokens);
  EXPECT_LT(forced.moe_layer(0).expert_tokens, balanced.moe_layer(0).expert_tokens * 5 / 4);
}

// Megatron's capacity factor: a skewed router's busiest rank computes at most its capacity (the rest dropped), and
// padded every expert computes exactly its capacity; the memory model holds the routed copies so.
TEST(LoweringMoe, CapacityClipsAndPaddingFillsTheExperts) {
  Scenario sc = make_scenario(testing::moe_shaped(), 1, 1024, 16);
  const lowering::RankShapes even = lowering::rank_shapes(sc, expert_parallel(sc, 4));
  sc.model.moe.routing = routing(RoutingDistribution::zipf, 1.5);
  const lowering::RankShapes skewed = lowering::rank_shapes(sc, expert_parallel(sc, 4));
  sc.model.moe.expert_capacity_factor = 1.25;
  const lowering::RankShapes capped = lowering::rank_shapes(sc, expert_parallel(sc, 4));
  EXPECT_LT(capped.moe_layer(0).expert_tokens, skewed.moe_layer(0).expert_tokens);
  EXPECT_LE(capped.moe_layer(0).expert_tokens, even.moe_layer(0).expert_tokens * 5 / 4 + 1);
  EXPECT_LT(capped.moe_layer(0).dispatch_bytes, skewed.moe_layer(0).dispatch_bytes);
  sc.model.moe.pad_expert_input_to_capacity = true;
  const Strategy st = expert_parallel(sc, 4);
  const lowering::RankShapes padded = lowering::rank_shapes(sc, st);
  EXPECT_EQ(padded.moe_layer(0).expert_tokens, (even.moe_layer(0).expert_tokens * 5 + 3) / 4);
  EXPECT_EQ(padded.moe_layer(0).busiest_expert_tokens, 0);  // every expert alike
  Scenario dropless = sc;
  dropless.model.moe.expert_capacity_factor.reset();
  dropless.model.moe.pad_expert_input_to_capacity = false;
  dropless.model.moe.routing.reset();
  EXPECT_GT(estimate_memory(sc, st).per_stage.front().activations,
            estimate_memory(dropless, st).per_stage.front().activations);
}

// Megatron-Core's experts run a clamped GLU's clamp and their FC2 bias as eager kernels (gpt-oss's experts;
// strategies/megatron_expert_passes.hpp): an elementwise op each way for each, of the bytes priced there per element
// (a plain pass's bytes in the time the kernels took on an H200), the clamp again where moe_act is recomputed; none
// under twin's own framework, without the clamp or without biases.
TEST(LoweringMoe, MegatronsExpertsRunTheirClampAndBiasEager) {
  Scenario sc = make_scenario(testing::moe_shaped(), 1, 1024, 16);
  sc.model.activation = Activation::quick_geglu;
  sc.model.activation_func_clamp_value = 7;
  sc.model.glu_linear_offset = 1;
  sc.model.add_bias_linear = true;
  Strategy st = expert_parallel(sc, kDispatcherEp);
  st.recompute = Recompute::selective;
  st.recompute_modules = {RecomputeModule::moe_act};
  const auto eager = [&](const Scenario& scenario, OpRole role) {
    std::vector<std::int64_t> bytes;
    const IterationGraph g = lower_to_op_graphs(scenario, st);
    for (const Op* op : ops_of(g.classes[0], [&](const Op& o) {
           return o.kind == OpKind::elementwise && o.role == role && o.layer == 0 && o.micro_batch == 0;
         }))
      bytes.push_back(op->bytes);
    return bytes;
  };
  EXPECT_TRUE(eager(sc, OpRole::expert_activation).empty());  // no framework named: twin execute's kernels
  EXPECT_TRUE(eager(sc, OpRole::expert_fc2).empty());
  sc.framework.name = FrameworkName::megatron_core;
  const lowering::RankShapes s = lowering::rank_shapes(sc, st);
  const std::int64_t activation_elements = s.moe_layer(0).expert_tokens * s.experts_local * s.moe_ffn;
  const std::int64_t fc2_elements = s.moe_layer(0).expert_tokens * s.experts_local * s.h;
  // forward, recomputed forward, backward
  EXPECT_EQ(eager(sc, OpRole::expert_activation),
            (std::vector<std::int64_t>{32 * activation_elements, 32 * activation_elements, 66 * activation_elements}));
  EXPECT_EQ(eager(sc, OpRole::expert_fc2), (std::vector<std::int64_t>{21 * fc2_elements, 47 * fc2_elements}));
  sc.model.activation_func_clamp_value = 0;
  EXPECT_TRUE(eager(sc, OpRole::expert_activation).empty());
  sc.model.add_bias_linear = false;
  EXPECT_TRUE(eager(sc, OpRole::expert_fc2).empty());
}

}  // namespace
}  // namespace twin
