// Expert tensor parallelism (Megatron's --expert-tensor-parallel-size): the folded expert grid's groups against
// Megatron's RankGenerator, the experts' GEMMs and the alltoall dispatcher's gathers and scatters over the
// expert-TP group, parameters and memory per term, the search dimension, the validity refusals and the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "core/moe_routing.hpp"
#include "strategies/lowering.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/memory.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/search.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using Groups = std::vector<std::vector<int>>;

// Every group of `kind` over the world, each by position, sorted by first rank.
Groups groups_of(const Strategy& s, GroupKind kind) {
  std::set<std::vector<int>> seen;
  for (int rank = 0; rank < s.world_size(); ++rank) seen.insert(group_members(s, kind, rank));
  return {seen.begin(), seen.end()};
}

// Megatron's generate_masked_orthogonal_rank_groups (megatron/core/parallel_state.py at NVIDIA/Megatron-LM
// d98e8a64dd), written from its docstring: ranks are digits over `sizes` (first fastest); a group is the ranks that
// agree on every unmasked digit, its members ordered by the masked digits (first fastest).
Groups megatron_groups(const std::vector<int>& sizes, const std::vector<bool>& mask) {
  int world = 1;
  for (int size : sizes) world *= size;
  std::vector<std::pair<std::vector<int>, std::vector<int>>> keyed;  // (unmasked digits, masked digits) per rank
  for (int rank = 0; rank < world; ++rank) {
    std::vector<int> outer, inner;
    for (int i = 0, rest = rank; i < static_cast<int>(sizes.size()); rest /= sizes[i], ++i)
      (mask[i] ? inner : outer).push_back(rest % sizes[i]);
    std::reverse(inner.begin(), inner.end());  // the first masked digit varies fastest within a group
    keyed.push_back({outer, inner});
  }
  std::vector<int> order(static_cast<std::size_t>(world));
  for (int i = 0; i < world; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keyed[a] < keyed[b]; });
  std::set<std::vector<int>> groups;
  std::vector<int> group;
  for (int i = 0; i < world; ++i) {
    group.push_back(order[i]);
    if (i + 1 == world || keyed[order[i + 1]].first != keyed[order[i]].first) {
      groups.insert(group);
      group.clear();
    }
  }
  return {groups.begin(), groups.end()};
}

Strategy folded(int tp, int cp, int dp, int pp, int ep, int etp) {
  Strategy s = testing::make_strategy(tp, pp, cp);
  s.data_parallel_size = dp;
  s.expert_model_parallel_size = ep;
  s.expert_tensor_parallel_size = etp;
  return s;
}

// A worked example of the folded grid (world 16: TP 2, DP 4, PP 2; EP 2, ETP 2, so expert-DP 2), the groups
// Megatron's expert RankGenerator (order tp-cp-ep-dp-pp, cp 1) makes, written out by hand.
TEST(ExpertTensorParallel, FoldedGridIsMegatronsWorkedExample) {
  const Strategy s = folded(2, 1, 4, 2, 2, 2);
  EXPECT_EQ(groups_of(s, GroupKind::expert_tensor),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(groups_of(s, GroupKind::expert),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(groups_of(s, GroupKind::expert_data),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(expert_data_parallel_size(s), 2);
  // The dense grid is unchanged by folding: TP pairs, and the pipeline across the two halves.
  EXPECT_EQ(groups_of(s, GroupKind::tensor), groups_of(folded(2, 1, 4, 2, 2, 1), GroupKind::tensor));
  EXPECT_EQ(groups_of(s, GroupKind::pipeline), groups_of(folded(2, 1, 4, 2, 2, 1), GroupKind::pipeline));
}

// Several shapes, ETP unequal to TP among them: each expert group kind equals Megatron's for the expert grid
// [etp, ep, edp, pp] with the masks of get_ranks('tp'), ('ep') and ('dp').
TEST(ExpertTensorParallel, FoldedGroupsAreMegatronsForEveryShape) {
  struct Shape {
    int tp, cp, dp, pp, ep, etp;
  };
  for (const Shape& x : {Shape{4, 1, 2, 1, 2, 2}, Shape{2, 2, 2, 2, 4, 2}, Shape{1, 1, 8, 1, 2, 4},
                         Shape{8, 1, 2, 2, 1, 4}, Shape{2, 1, 8, 1, 8, 1}, Shape{4, 2, 2, 1, 2, 1}}) {
    const Strategy s = folded(x.tp, x.cp, x.dp, x.pp, x.ep, x.etp);
    const int edp = x.tp * x.cp * x.dp / (x.ep * x.etp);
    const std::vector<int> grid = {x.etp, x.ep, edp, x.pp};
    const std::string shape = s.key();
    EXPECT_EQ(groups_of(s, GroupKind::expert_tensor), megatron_groups(grid, {true, false, false, false})) << shape;
    EXPECT_EQ(groups_of(s, GroupKind::expert), megatron_groups(grid, {false, true, false, false})) << shape;
    EXPECT_EQ(groups_of(s, GroupKind::expert_data), megatron_groups(grid, {false, false, true, false})) << shape;
    EXPECT_EQ(expert_data_parallel_size(s), edp) << shape;
  }
}

// On 2 nodes of 8: ETP 2 x EP 4 fits a node, so the experts' groups stay on NVLink; the expert-data group crosses.
TEST(ExpertTensorParallel, ExpertGroupsSpanOneNodeWhenTheyFit) {
  const Cluster cluster = testing::h100_nodes(2);
  const auto spans = group_spans(folded(2, 1, 8, 1, 4, 2), cluster, 0);
  EXPECT_EQ(spans[static_cast<int>(GroupKind::expert_tensor)].nodes, 1);
  EXPECT_EQ(spans[static_cast<int>(GroupKind::expert)].nodes, 1);
  EXPECT_EQ(spans[static_cast<int>(GroupKind::expert)].size, 4);
  EXPECT_EQ(spans[static_cast<int>(GroupKind::expert_data)].nodes, 2);
  EXPECT_EQ(spans[static_cast<int>(GroupKind::expert_data)].size, 2);
}

Scenario moe_scenario() {
  Scenario sc = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);
  sc.framework.moe_token_dispatcher_type = MoeTokenDispatcher::alltoall;
  return sc;
}

// TP 2 with SP, EP 2, on one node of 8 (DP 4): expert TP `etp`, completed and valid.
Strategy moe_strategy(const Scenario& sc, int etp) {
  Strategy st = testing::make_strategy(2, 1);
  st.expert_model_parallel_size = 2;
  st.expert_tensor_parallel_size = etp;
  EXPECT_EQ(complete_strategy(sc, st), std::nullopt);
  EXPECT_EQ(invalid_reason(sc, st), std::nullopt) << st.key();
  return st;
}

std::vector<Op> ops_where(const RankClass& rc, const std::function<bool(const Op&)>& wanted) {
  std::vector<Op> found;
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (wanted(rc.op(i))) found.push_back(rc.op(i));
  return found;
}

// Each expert's FC1 columns and FC2 rows over ETP 2: the grouped GEMMs take twice the rows (the expert-TP group's
// copies) at half the width; the all-to-all moves what it moved at ETP 1.
TEST(ExpertTensorParallel, ExpertGemmsAreShardedAndSeeTheGroupsCopies) {
  const Scenario sc = moe_scenario();
  const lowering::RankShapes one = lowering::rank_shapes(sc, moe_strategy(sc, 1));
  const lowering::RankShapes two = lowering::rank_shapes(sc, moe_strategy(sc, 2));
  EXPECT_EQ(two.moe_ffn, 1408 / 2);
  EXPECT_EQ(two.moe_fc1_width, 2 * 1408 / 2);
  EXPECT_EQ(two.moe_layer(0).expert_tokens, 2 * one.moe_layer(0).expert_tokens);
  EXPECT_EQ(two.moe_layer(0).dispatch_bytes, one.moe_layer(0).dispatch_bytes);
  EXPECT_EQ(two.expert_data_group, 2);
  const IterationGraph g = lower_to_op_graphs(sc, moe_strategy(sc, 2));
  const auto gemm = [&](OpRole role, GemmPass pass) {
    const auto found = ops_where(g.classes[0], [&](const Op& op) {
      return op.kind == OpKind::gemm && op.role == role && op.gemm_pass == pass && op.layer == 0 && op.micro_batch == 0;
    });
    EXPECT_FALSE(found.empty());
    return found.front().gemm;
  };
  const std::int64_t rows = two.moe_layer(0).expert_tokens, h = 1024;
  const GemmShape fc1 = gemm(OpRole::expert_fc1, GemmPass::forward);
  EXPECT_EQ(std::vector<std::int64_t>({fc1.m, fc1.n, fc1.k, fc1.count}), std::vector<std::int64_t>({rows, 1408, h, 4}));
  const GemmShape fc2 = gemm(OpRole::expert_fc2, GemmPass::forward);
  EXPECT_EQ(std::vector<std::int64_t>({fc2.m, fc2.n, fc2.k}), std::vector<std::int64_t>({rows, h, 704}));
  const GemmShape fc2_wgrad = gemm(OpRole::expert_fc2, GemmPass::weight_gradient);
  EXPECT_EQ(std::vector<std::int64_t>({fc2_wgrad.m, fc2_wgrad.n, fc2_wgrad.k}),
            std::vector<std::int64_t>({704, h, rows}));
}

// The alltoall dispatcher under ETP 2, one MoE layer of one micro-batch, in issue order: forward, the dispatch's
// all-to-all then the gathers of the tokens and their probabilities over the expert-TP group; the combine's
// reduce-scatter then its all-to-all. Backward mirrors it (a gather's backward is a reduce-scatter).
TEST(ExpertTensorParallel, DispatcherGathersAndScattersOverTheExpertTensorGroup) {
  const Scenario sc = moe_scenario();
  const Strategy st = moe_strategy(sc, 2);
  const lowering::RankShapes shapes = lowering::rank_shapes(sc, st);
  const std::int64_t a2a = shapes.moe_layer(0).dispatch_bytes, gathered = 2 * a2a, probs = gathered / 1024;
  const IterationGraph g = lower_to_op_graphs(sc, st);
  const auto exchange = ops_where(g.classes[0], [](const Op& op) {
    return op.layer == 0 && op.micro_batch == 0 && (op.group == GroupKind::expert || op.group == GroupKind::expert_tensor);
  });
  struct Seen {
    Phase phase;
    OpKind kind;
    OpRole role;
    GroupKind group;
    std::int64_t bytes;
    bool operator==(const Seen&) const = default;
  };
  std::vector<Seen> seen;
  for (const Op& op : exchange) {
    seen.push_back({op.phase, op.kind, op.role, op.group, op.bytes});
    if (op.group == GroupKind::expert_tensor) EXPECT_EQ(op.group_size, 2);
  }
  using K = OpKind;
  using R = OpRole;
  const GroupKind ep = GroupKind::expert, etp = GroupKind::expert_tensor;
  const Phase f = Phase::forward, b = Phase::backward;
  const std::vector<Seen> expected = {
      {f, K::all_to_all, R::dispatch, ep, a2a},          {f, K::all_gather, R::dispatch, etp, gathered},
      {f, K::all_gather, R::dispatch, etp, probs},       {f, K::reduce_scatter, R::combine, etp, gathered},
      {f, K::all_to_all, R::combine, ep, a2a},           {b, K::all_to_all, R::combine, ep, a2a},
      {b, K::all_gather, R::combine, etp, gathered},     {b, K::reduce_scatter, R::dispatch, etp, gathered},
      {b, K::reduce_scatter, R::dispatch, etp, probs},   {b, K::all_to_all, R::dispatch, ep, a2a}};
  ASSERT_EQ(seen.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(seen[i] == expected[i]) << i << ": " << to_string(seen[i].kind) << " " << to_string(seen[i].group);
  // At ETP 1 no op names the expert-TP group.
  const IterationGraph whole = lower_to_op_graphs(sc, moe_strategy(sc, 1));
  EXPECT_TRUE(ops_where(whole.classes[0], [](const Op& op) { return op.group == GroupKind::expert_tensor; }).empty());
}

// Expert weights per rank halve at ETP 2, the dense ones stay; summed over the expert-TP group they are the model's.
// Optimizer states under ZeRO-1 shard the expert half over the expert-data group (TP*DP/(EP*ETP) = 2 ranks).
TEST(ExpertTensorParallel, ParametersAndStatesPerTerm) {
  const Scenario sc = moe_scenario();
  Strategy one = moe_strategy(sc, 1), two = moe_strategy(sc, 2);
  const RankParameters p1 = stage_parameters_per_rank(sc.model, one, 0), p2 = stage_parameters_per_rank(sc.model, two, 0);
  EXPECT_EQ(p2.dense, p1.dense);
  EXPECT_EQ(2 * p2.expert, p1.expert);
  const LayerParameterGroups g = layer_parameter_groups(sc.model, 0);
  EXPECT_EQ(2 * layer_parameters_per_rank(sc.model, 0, 2, 2, 2).expert, g.experts / 2 * g.per_expert);
  one.zero_stage = two.zero_stage = 1;
  const StateBytes bytes = state_bytes_per_parameter(sc.training, sc.framework);
  const MemoryBreakdown m1 = estimate_memory(sc, one).per_stage.front();
  const MemoryBreakdown m2 = estimate_memory(sc, two).per_stage.front();
  EXPECT_EQ(m2.parameters, std::llround((p2.dense + p2.expert) * bytes.weights));
  EXPECT_EQ(m2.gradients, std::llround((p2.dense + p2.expert) * bytes.gradients));
  EXPECT_EQ(m2.optimizer_states, std::llround(p2.dense * bytes.optimizer / 4 + p2.expert * bytes.optimizer / 2));
  EXPECT_EQ(m1.optimizer_states, std::llround(p1.dense * bytes.optimizer / 4 + p1.expert * bytes.optimizer / 4));
}

// Saved activations of an MoE layer: the routed rows are the expert-TP group's (twice), the experts' FC1 output
// and FC2 input half as wide (the same bytes), the hidden-wide routed tensors (the permuted tokens and the expert
// outputs, bf16) twice.
TEST(ExpertTensorParallel, RoutedActivationsAreTheGroupsCopiesAtAShardOfTheWidth) {
  const ModelConfig m = testing::moe_shaped();
  const auto layer = [&](int etp) {
    return activation_bytes_per_layer(m, 1024, 1, 2, true, 1, Recompute::none, true, 2, false,
                                      module_bit(RecomputeModule::core_attn), etp);
  };
  double busiest = 1;  // the busiest EP rank's copies over the mean, as the memory model draws them
  for (const ExpertParallelLoad& load : layer_loads(m, 2, 1024.0 / 2 * m.moe.top_k * 2))
    busiest = std::max(busiest, load.rank_load);
  const double copies = 1024.0 / 2 * m.moe.top_k * busiest;  // this rank's tokens (SP over TP 2) times top-k
  EXPECT_NEAR(static_cast<double>(layer(2) - layer(1)), 2 * 2 * copies * m.hidden_size, 1.0);
  EXPECT_NEAR(static_cast<double>(layer(4) - layer(1)), 3 * 2 * 2 * copies * m.hidden_size, 1.0);
}

// The search's default tries ETP 1 only (today's candidates); a list multiplies them, and a folding that does not
// divide is infeasible with the rule.
TEST(ExpertTensorParallel, SearchDimensionDefaultsToOne) {
  Scenario sc = moe_scenario();
  sc.search.tensor_model_parallel_size = {2};
  sc.search.pipeline_model_parallel_size = {1};
  sc.search.expert_model_parallel_size = {2, 4};
  const std::vector<Candidate> before = enumerate_candidates(sc);
  for (const Candidate& c : before) EXPECT_EQ(c.strategy.expert_tensor_parallel_size, 1);
  sc.search.expert_tensor_parallel_size = {1, 2, 4};
  const std::vector<Candidate> after = enumerate_candidates(sc);
  EXPECT_EQ(after.size(), 3 * before.size());
  bool refused = false;
  for (const Candidate& c : after)
    if (c.strategy.expert_tensor_parallel_size == 4 && c.strategy.expert_model_parallel_size == 4) {
      EXPECT_EQ(c.infeasible_reason,
                "tensor*context*data 8 not divisible by expert_tensor_parallel_size*expert_model_parallel_size 16");
      refused = true;
    }
  EXPECT_TRUE(refused);
}

TEST(ExpertTensorParallel, ValidityNamesMegatronsRules) {
  const Scenario sc = moe_scenario();
  const auto reason = [](const Scenario& s, int etp) {
    Strategy st = testing::make_strategy(2, 1);
    st.expert_model_parallel_size = 2;
    st.expert_tensor_parallel_size = etp;
    EXPECT_EQ(complete_strategy(s, st), std::nullopt);
    return invalid_reason(s, st).value_or("");
  };
  Scenario dense = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
  Strategy st = testing::make_strategy(2, 1);
  st.expert_tensor_parallel_size = 2;
  ASSERT_EQ(complete_strategy(dense, st), std::nullopt);
  EXPECT_EQ(invalid_reason(dense, st).value_or(""), "expert_tensor_parallel_size 2 needs a MoE model (num_experts > 0)");
  Scenario odd = sc;
  odd.model.moe.ffn_hidden_size = 1410;
  EXPECT_EQ(reason(odd, 4), "moe ffn_hidden_size 1410 not divisible by expert_tensor_parallel_size 4");
  Scenario biased = sc;
  biased.model.add_bias_linear = true;
  EXPECT_NE(reason(biased, 2).find("Megatron has expert biases only at expert_tensor_parallel_size 1"),
            std::string::npos);
  EXPECT_EQ(reason(biased, 1), "");
  Scenario gathered = sc;
  gathered.framework.moe_token_dispatcher_type = MoeTokenDispatcher::allgather;
  EXPECT_NE(reason(gathered, 2).find("alltoall token dispatcher only"), std::string::npos);
  Scenario fsdp = sc;
  fsdp.framework.name = FrameworkName::pytorch_fsdp2;
  EXPECT_NE(reason(fsdp, 2).find("neither PyTorch's FSDP"), std::string::npos);
  EXPECT_EQ(reason(sc, 2), "");
  EXPECT_EQ(reason(sc, 4), "");
}

TEST(ExpertTensorParallel, KeyNamesExpertTensorParallelOnlyAboveOne) {
  Strategy s = testing::make_strategy(2, 1);
  s.data_parallel_size = 4;
  s.expert_model_parallel_size = 2;
  EXPECT_EQ(s.key(), "tp2.pp1.cp1.ep2.dp4.vpp1.sp.mbs1.z0.rc-none.1f1b");
  s.expert_tensor_parallel_size = 2;
  EXPECT_EQ(s.key(), "tp2.pp1.cp1.ep2.etp2.dp4.vpp1.sp.mbs1.z0.rc-none.1f1b");
}

}  // namespace
}  // namespace twin
