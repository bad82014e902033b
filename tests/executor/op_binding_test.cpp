// The executor's reading of the op graph: every op of real lowerings gets an action, TP collectives
// serve the right linear, a backward's GEMMs are input and weight gradient, and none of it depends on the
// order the lowering issues ops in.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "core/op_kinds.hpp"
#include "strategies/context_ring.hpp"
#include "executor/op_binding.hpp"
#include "../strategies/strategy_fixtures.hpp"
#include "op_binding_fixtures.hpp"

namespace twin::exec {
namespace {

using testing_binding::count_actions;
using testing_binding::lower;
using testing_binding::fp8_scenario;
using testing_binding::moe_on;

TEST(OpBinding, SingleGpuLayerHasEveryComputeActionOncePerMicroBatch) {
  Strategy s = testing::make_strategy(1, 1);
  s.micro_batch_size = 2;
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 64);
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  ASSERT_EQ(s.num_micro_batches, 4);  // 64 sequences over DP 8 in micro-batches of 2
  const IterationGraph graph = lower(s, scenario);
  const auto counts = count_actions(graph.classes[0]);
  const int micro_batches = 4, layers = 4;
  EXPECT_EQ(counts.at(Action::linear_forward), micro_batches * (layers * 4 + 1));
  EXPECT_EQ(counts.at(Action::linear_input_grad), micro_batches * (layers * 4 + 1));
  EXPECT_EQ(counts.at(Action::linear_weight_grad), micro_batches * (layers * 4 + 1));
  EXPECT_EQ(counts.at(Action::attention_forward), micro_batches * layers);
  EXPECT_EQ(counts.at(Action::norm_backward), micro_batches * (layers * 2 + 1));
  EXPECT_EQ(counts.at(Action::optimizer_step), 1);
  EXPECT_EQ(counts.count(Action::gather_input), 0u);
}

// Residual fusion leaves no residual op on one GPU: the projection's and fc2's forward GEMMs add the stream, the
// layers' norm backwards the skip path's gradient; the binding keeps every other action.
TEST(OpBinding, ResidualFusionLeavesTheAddsToTheGemmsAndNorms) {
  Strategy s = testing::make_strategy(1, 1);
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 64);
  scenario.framework.residual_fusion = true;
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  const IterationGraph graph = lower(s, scenario);
  const RankClass& rc = graph.classes[0];
  const auto counts = count_actions(rc);
  const int micro_batches = s.num_micro_batches, layers = 4;
  EXPECT_EQ(counts.count(Action::residual_forward) + counts.count(Action::residual_backward), 0u);
  EXPECT_EQ(counts.at(Action::linear_forward), micro_batches * (layers * 4 + 1));
  EXPECT_EQ(counts.at(Action::norm_backward), micro_batches * (layers * 2 + 1));
  const std::vector<OpBinding> bindings = bind_ops(rc);
  int fused_gemms = 0, fused_norms = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    if (!rc.op(i).fuses_residual) continue;
    if (bindings[i].action == Action::linear_forward) {
      ++fused_gemms;
      EXPECT_TRUE(bindings[i].subject == OpRole::attention_projection || bindings[i].subject == OpRole::fc2);
    } else {
      ++fused_norms;
      EXPECT_EQ(bindings[i].action, Action::norm_backward);
      EXPECT_NE(bindings[i].subject, OpRole::final_norm);
    }
  }
  EXPECT_EQ(fused_gemms, micro_batches * layers * 2);
  EXPECT_EQ(fused_norms, micro_batches * layers * 2);
}

TEST(OpBinding, TensorCollectivesServeTheirLinear) {
  const IterationGraph graph = lower(testing::make_strategy(2, 1, 1, true));
  const RankClass& rc = graph.classes[0];
  const auto bindings = bind_ops(rc);
  std::map<std::pair<Action, OpRole>, int> seen;
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (rc.op(i).group == GroupKind::tensor && rc.op(i).micro_batch == 0 && rc.op(i).layer == 1)
      ++seen[{bindings[i].action, bindings[i].subject}];
  // Forward: gathers before QKV and FC1, reduce-scatters after the projection and FC2.
  EXPECT_EQ((seen[{Action::gather_input, OpRole::qkv_projection}]), 2);  // forward + again for the weight gradient
  EXPECT_EQ((seen[{Action::gather_input, OpRole::fc1}]), 2);
  EXPECT_EQ((seen[{Action::reduce_output, OpRole::attention_projection}]), 1);
  EXPECT_EQ((seen[{Action::reduce_output, OpRole::fc2}]), 1);
  // Backward: gathers of the row-parallel linears' output gradients, reductions of the column-parallel inputs'.
  EXPECT_EQ((seen[{Action::gather_output_grad, OpRole::fc2}]), 1);
  EXPECT_EQ((seen[{Action::gather_output_grad, OpRole::attention_projection}]), 1);
  EXPECT_EQ((seen[{Action::reduce_input_grad, OpRole::fc1}]), 1);
  EXPECT_EQ((seen[{Action::reduce_input_grad, OpRole::qkv_projection}]), 1);
}

TEST(OpBinding, InputGradientComesBeforeWeightGradientWithTheirShapes) {
  const IterationGraph graph = lower(testing::make_strategy(1, 1));
  const RankClass& rc = graph.classes[0];
  const auto bindings = bind_ops(rc);
  int checked = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind != OpKind::gemm || op.phase != Phase::backward) continue;
    // tokens = 2 * 1024; hidden 1024: the input gradient has the tokens as rows, the weight gradient as k.
    if (bindings[i].action == Action::linear_input_grad) EXPECT_EQ(op.gemm.m, 1024 * 1) << op_name(op);
    if (bindings[i].action == Action::linear_weight_grad) EXPECT_EQ(op.gemm.k, 1024 * 1) << op_name(op);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(OpBinding, PipelineStagesSendAndReceiveBothDirections) {
  const IterationGraph graph = lower(testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b));
  for (const RankClass& rc : graph.classes) {
    const auto counts = count_actions(rc);
    EXPECT_EQ(counts.at(Action::send_activation) + counts.at(Action::recv_activation),
              counts.at(Action::send_gradient) + counts.at(Action::recv_gradient));
    EXPECT_GT(counts.at(Action::send_activation), 0);
  }
}

// A lowering that issued a layer's ops in another order (a deferred weight gradient, a zero-bubble schedule)
// must bind every op to the same action: binding reads what each op says, never its position.
TEST(OpBinding, ReversedOpOrderBindsEveryOpTheSame) {
  const IterationGraph graph = lower(testing::make_strategy(2, 1, 1, true));
  const RankClass& rc = graph.classes[0];
  const auto in_order = bind_ops(rc);
  RankClass reversed;
  for (OpIndex i = static_cast<OpIndex>(rc.size()); i-- > 0;) reversed.add(rc.op(i));
  const auto bound = bind_ops(reversed);
  int tensor_collectives = 0, backward_gemms = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const OpBinding& reread = bound[rc.size() - 1 - i];
    EXPECT_EQ(reread.action, in_order[i].action) << op_name(rc.op(i));
    EXPECT_EQ(reread.subject, in_order[i].subject) << op_name(rc.op(i));
    tensor_collectives += rc.op(i).group == GroupKind::tensor ? 1 : 0;
    backward_gemms += rc.op(i).kind == OpKind::gemm && rc.op(i).phase == Phase::backward ? 1 : 0;
  }
  EXPECT_GT(tensor_collectives, 0);
  EXPECT_GT(backward_gemms, 0);
}

// Each weight's gradient is stored by exactly one op per step, the first of its layer and subject in issue
// order, and added to by the rest: the executor then zeroes no gradient buffer per step.
TEST(OpBinding, EachWeightGradientIsStoredOnceThenAccumulated) {
  Strategy strategy = testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b);
  strategy.recompute = Recompute::full;
  for (const RankClass& rc : lower(strategy).classes) {
    const auto bindings = bind_ops(rc);
    std::map<std::pair<std::int32_t, OpRole>, int> stores, adds;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const OpBinding& b = bindings[i];
      if (b.action != Action::linear_weight_grad && b.action != Action::norm_backward &&
          b.action != Action::embedding_backward) {
        EXPECT_FALSE(b.first_gradient) << op_name(rc.op(i));
        continue;
      }
      const auto key = std::make_pair(rc.op(i).layer, b.subject);
      if (b.first_gradient) {
        EXPECT_EQ(adds[key], 0) << op_name(rc.op(i)) << ": an add came before the store";
        ++stores[key];
      } else {
        ++adds[key];
      }
    }
    EXPECT_FALSE(stores.empty());
    for (const auto& [key, count] : stores) EXPECT_EQ(count, 1) << to_string(key.second) << " of layer " << key.first;
    for (const auto& [key, count] : adds) EXPECT_EQ(stores.count(key), 1u) << to_string(key.second);
    // Several micro-batches: every stored gradient is also accumulated.
    for (const auto& [key, count] : stores) EXPECT_GT(adds[key], 0) << to_string(key.second);
    // The first stage's embedding table is among them (its first backward zeroes the table, then adds).
    bool has_embedding = false;
    for (OpIndex i = 0; i < rc.size(); ++i) has_embedding |= rc.op(i).kind == OpKind::embedding_backward;
    if (has_embedding) EXPECT_EQ(stores.count({-1, OpRole::embedding}), 1u);
  }
}

TEST(OpBinding, RefusesAGemmThatDoesNotSayItsPass) {
  RankClass rc;
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.role = OpRole::fc1;
  gemm.gemm = {8, 8, 8};
  rc.add(gemm);
  EXPECT_THROW(bind_ops(rc), std::invalid_argument);
}

// Tied embeddings on one stage: the output projection's weight gradient (first in the backward) stores the
// table's gradient and the embedding backward adds to it; untied, each stores its own. Either way the first embedding
// backward starts the learned positions' gradient, which only it writes (2026-11-30: with a tied table nothing zeroed
// it, and GPT's position gradient summed over every step; over two GPUs, its reduction doubled it every step).
TEST(OpBinding, TiedEmbeddingsStoreTheTablesGradientOnce) {
  Strategy s = testing::make_strategy(1, 1, 1, false);
  Scenario scenario = testing::make_scenario(testing::llama_shaped(2), 1, 1024, 16);
  scenario.cluster.node_groups[0].gpus_per_node = 1;
  scenario.model.untie_embeddings_and_output_weights = false;
  const IterationGraph graph = lower(s, scenario);
  for (bool tied : {true, false}) {
    const std::vector<OpBinding> bindings = bind_ops(graph.classes[0], tied);
    int output_first = 0, embedding_first = 0, positions_first = 0, embedding_backwards = 0;
    for (const OpBinding& b : bindings) {
      output_first += b.first_gradient && b.subject == OpRole::output_projection;
      embedding_first += b.first_gradient && b.action == Action::embedding_backward;
      positions_first += b.first_position_gradient;
      embedding_backwards += b.action == Action::embedding_backward;
    }
    EXPECT_EQ(output_first, 1) << tied;
    EXPECT_EQ(embedding_first, tied ? 0 : 1) << tied;
    EXPECT_EQ(positions_first, 1) << tied;
    EXPECT_GT(embedding_backwards, 1) << tied;  // several micro-batches: the later ones add
  }
}

// The op-kind table says which kinds twin execute runs: each of them is bound in a dense TP/SP/PP lowering or
// an MoE one (pipeline stages, expert parallelism), and a lone op of any other kind is refused.
// FP8 linears (issue 41 item 3): each cast binds to fp8_cast naming its linear (the weights' cast after the step
// none), the linears' FP8 GEMMs keep their actions, under per-tensor and block scales alike; GEMMs of MX scales
// (Blackwell's) are refused.
TEST(OpBinding, BindsFp8LinearsOfPerTensorAndBlockScaling) {
  for (const Fp8Recipe recipe : {Fp8Recipe::tensorwise, Fp8Recipe::blockwise}) {
    const IterationGraph graph = lower(testing::make_strategy(1, 1, 1, false), fp8_scenario(recipe));
    const RankClass& rc = graph.classes[0];
    const std::vector<OpBinding> bindings = bind_ops(rc);
    int casts = 0, weight_casts = 0, fp8_gemms = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind == OpKind::fp8_cast) {
        EXPECT_EQ(bindings[i].action, Action::fp8_cast);
        EXPECT_EQ(bindings[i].subject, op.linear);
        ++(op.linear_tensor == LinearTensor::weight ? weight_casts : casts);
      }
      if (op.kind == OpKind::gemm && is_fp8(op.gemm)) {
        ++fp8_gemms;
        EXPECT_TRUE(bindings[i].action == Action::linear_forward || bindings[i].action == Action::linear_input_grad ||
                    bindings[i].action == Action::linear_weight_grad);
      }
    }
    EXPECT_GT(casts, 0) << to_string(recipe);
    EXPECT_EQ(weight_casts, 1) << to_string(recipe);
    EXPECT_EQ(fp8_gemms, 3 * casts / 2) << to_string(recipe);  // per linear and micro-batch: two casts, three GEMMs
  }
  EXPECT_THROW(bind_ops(lower(testing::make_strategy(1, 1, 1, false), fp8_scenario(Fp8Recipe::mxfp8)).classes[0]),
               std::invalid_argument);
}

// Delayed scaling under data parallelism: each pass's amax all-reduce binds to fp8_amax_reduce; a lone one over
// another group is refused.
TEST(OpBinding, BindsDelayedScalingsAmaxReductions) {
  const IterationGraph graph = lower(testing::make_strategy(1, 1, 1, false), fp8_scenario(Fp8Recipe::delayed));
  // 8 GPUs: data parallelism 8, so 16 sequences are 2 micro-batches of 1 per GPU.
  EXPECT_EQ(count_actions(graph.classes[0]).at(Action::fp8_amax_reduce), 2 * 2);  // after each forward and backward
  RankClass lone;
  Op reduction;
  reduction.kind = OpKind::all_reduce;
  reduction.role = OpRole::fp8_amax;
  reduction.group = GroupKind::data;
  lone.add(reduction);
  EXPECT_THROW(bind_ops(lone), std::invalid_argument);
}

TEST(OpBinding, RunsExactlyTheKindsTheTableSaysItRuns) {
  Strategy strategy = testing::make_strategy(2, 2, 1, true);
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
  std::set<OpKind> bound;
  for (const RankClass& rc : lower(strategy, scenario).classes) {
    bind_ops(rc);
    for (OpIndex i = 0; i < rc.size(); ++i) bound.insert(rc.op(i).kind);
  }
  Strategy expert_parallel = testing::make_strategy(1, 1, 1, false);
  expert_parallel.expert_model_parallel_size = 2;
  for (const Strategy& moe_strategy : {testing::make_strategy(1, 2, 1, false), expert_parallel})
    for (const RankClass& rc : lower(moe_strategy, moe_on(2)).classes) {
      bind_ops(rc);
      for (OpIndex i = 0; i < rc.size(); ++i) bound.insert(rc.op(i).kind);
    }
  // FP8 on one GPU, and at TP 2 with SP (the gathered rows' transposes).
  for (const bool sequence_parallel : {false, true})
    for (const RankClass& rc : lower(testing::make_strategy(sequence_parallel ? 2 : 1, 1, 1, sequence_parallel),
                                     fp8_scenario(Fp8Recipe::tensorwise))
                                   .classes) {
      bind_ops(rc);
      for (OpIndex i = 0; i < rc.size(); ++i) bound.insert(rc.op(i).kind);
    }
  for (OpKind kind : all_op_kinds()) {
    if (op_kind_traits(kind).executor_runs) {
      EXPECT_EQ(bound.count(kind), 1u) << to_string(kind) << " runs but no lowering here binds it";
      continue;
    }
    RankClass lone;
    Op op;
    op.kind = kind;
    op.gemm_pass = GemmPass::forward;
    op.group = GroupKind::expert;
    lone.add(op);
    EXPECT_THROW(bind_ops(lone), std::invalid_argument) << to_string(kind);
  }
}

// Context parallelism's ring: each layer's blocks and exchanges bind to the ring's actions, as many as the graph has
// (forward cp blocks and cp - 1 exchanges, backward cp blocks and cp + 1 exchanges).
TEST(OpBinding, BindsTheContextParallelRing) {
  const int cp = 2;
  const IterationGraph graph = lower(testing::make_strategy(1, 1, cp, false));
  const RankClass& rc = graph.classes[0];
  std::map<Action, int> count = count_actions(rc);
  int layer_passes = 0;  // (layer, micro-batch) forward passes
  for (OpIndex i = 0; i < rc.size(); ++i)
    layer_passes += rc.op(i).kind == OpKind::norm_forward && rc.op(i).role == OpRole::input_norm;
  EXPECT_EQ(count[Action::ring_attention_forward], cp * layer_passes);
  EXPECT_EQ(count[Action::ring_exchange], (cp - 1) * layer_passes);
  EXPECT_EQ(count[Action::ring_attention_backward], cp * layer_passes);
  EXPECT_EQ(count[Action::ring_exchange_backward], (cp + 1) * layer_passes);
  EXPECT_EQ(count[Action::ring_merge], cp * layer_passes);
  EXPECT_EQ(count[Action::ring_gradient_add], (cp - 1) * layer_passes);
  EXPECT_EQ(count[Action::attention_forward] + count[Action::attention_backward], 0);
}

// What each exchange of the ring carries (strategies/context_ring.hpp), against the graph's bytes: the rank's packed
// K | V block (bf16 tokens x 2 x kv heads x head_dim) once per part carried, at every step of both passes.
TEST(OpBinding, RingExchangesCarryTheGraphsBytes) {
  for (int cp : {2, 4}) {
    Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
    const Strategy strategy = testing::make_strategy(2, 1, cp, true);
    const IterationGraph graph = lower(strategy, scenario);
    const RankClass& rc = graph.classes[0];
    const std::int64_t tokens = strategy.micro_batch_size * 1024 / cp;
    const std::int64_t head_dim = scenario.model.kv_channels ? scenario.model.kv_channels
                                                             : scenario.model.hidden_size / scenario.model.num_attention_heads;
    const std::int64_t kv_width = scenario.model.num_query_groups / 2 * head_dim;  // per TP rank (TP 2)
    const std::int64_t block_bytes = tokens * 2 * kv_width * 2;
    int exchanges = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.role != OpRole::cp_exchange) continue;
      const RingPayload payload = ring_payload(cp, op.ring_step, op.phase == Phase::backward);
      EXPECT_EQ(op.bytes, payload.blocks() * block_bytes) << op_name(op) << " step " << op.ring_step;
      ++exchanges;
    }
    EXPECT_GT(exchanges, 0);
  }
  EXPECT_THROW(ring_payload(2, 1, false), std::invalid_argument);  // forward: no exchange after the last block's
  EXPECT_THROW(ring_payload(2, 3, true), std::invalid_argument);
}

TEST(OpBinding, RefusesWhatTheExecutorDoesNotRun) {
  // Context parallelism's all-gathered form: its blocks are the mean of the ranks' split, no rank's own.
  Scenario gathered = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
  gathered.framework.cp_comm_type = CpCommType::all_gather;
  try {
    bind_ops(lower(testing::make_strategy(1, 1, 2, false), gathered).classes[0]);
    ADD_FAILURE() << "all-gathered context parallelism was bound";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("all_gather"), std::string::npos) << e.what();
  }
  // An all-to-all over a tensor group that does not say which linear tensor it moves (a Ulysses layer's do).
  RankClass lone;
  Op op;
  op.kind = OpKind::all_to_all;
  op.role = OpRole::tp_gather;
  op.group = GroupKind::tensor;
  lone.add(op);
  try {
    bind_ops(lone);
    ADD_FAILURE() << "an all-to-all of no tensor was bound";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("moves no linear's tensor"), std::string::npos) << e.what();
  }
}

// Each action's name is its enumerator's (the table is in declaration order; the count is checked at compile time).
TEST(OpBinding, ActionNamesFollowTheEnumeration) {
  EXPECT_EQ(to_string(Action::embedding_forward), "embedding_forward");
  EXPECT_EQ(to_string(Action::send_strands), "send_strands");
  EXPECT_EQ(to_string(Action::recv_strands), "recv_strands");
  EXPECT_EQ(to_string(Action::routing_counts_reduce), "routing_counts_reduce");
  EXPECT_EQ(to_string(Action::dispatch_exchange), "dispatch_exchange");
  EXPECT_EQ(to_string(Action::combine_exchange_backward), "combine_exchange_backward");
  EXPECT_EQ(to_string(Action::ring_exchange_backward), "ring_exchange_backward");
  EXPECT_EQ(to_string(Action::ring_gradient_add), "ring_gradient_add");
  EXPECT_EQ(to_string(Action::phase_handoff), "phase_handoff");
}
}  // namespace
}  // namespace twin::exec
