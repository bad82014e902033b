// The executor's reading of the op graph: every op of real lowerings gets an action, TP collectives
// serve the right linear, a backward's GEMMs are input and weight gradient, and none of it depends on the
// order the lowering issues ops in.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "core/op_kinds.hpp"
#include "executor/op_binding.hpp"
#include "strategies/lowering.hpp"
#include "strategies/schedule.hpp"
#include "strategies/validity.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "../strategies/strategy_fixtures.hpp"
#include "../strategies/hot_switch/hot_switch_fixture.hpp"

namespace twin::exec {
namespace {

IterationGraph lower(Strategy strategy, Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16)) {
  if (auto reason = complete_strategy(scenario, strategy)) throw std::runtime_error(*reason);
  return lower_to_op_graphs(scenario, strategy);
}

// The MoE model on `gpus` GPUs of one node (so that the data group, and the experts' with it, can be 1).
Scenario moe_on(int gpus) {
  Scenario scenario = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);
  scenario.cluster.node_groups[0].gpus_per_node = gpus;
  return scenario;
}

std::map<Action, int> count_actions(const RankClass& rc) {
  std::map<Action, int> counts;
  for (const OpBinding& b : bind_ops(rc)) ++counts[b.action];
  return counts;
}

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

// The op-kind table says which kinds twin execute runs: each of them is bound in a dense TP/SP/PP lowering,
// and a lone op of any other kind is refused.
// An MoE layer on one GPU: the router once per micro-batch and layer, each expert GEMM's three products as
// grouped GEMMs of their own actions, the dense linears only for attention and the output layer.
TEST(OpBinding, ExpertsBlockBindsEveryOpOnOneGpu) {
  Strategy s = testing::make_strategy(1, 1, 1, false);
  s.micro_batch_size = 2;
  Scenario scenario = moe_on(1);
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  ASSERT_EQ(s.num_micro_batches, 8);  // 16 sequences in micro-batches of 2
  const IterationGraph graph = lower(s, scenario);
  const auto counts = count_actions(graph.classes[0]);
  const int passes = 8 * 4;  // micro-batches x MoE layers
  for (Action a : {Action::router_forward, Action::router_input_grad, Action::router_weight_grad,
                   Action::expert_dispatch, Action::expert_dispatch_backward, Action::expert_activation_forward,
                   Action::expert_activation_backward, Action::expert_combine, Action::expert_combine_backward})
    EXPECT_EQ(counts.at(a), passes) << to_string(a);
  for (Action a : {Action::expert_forward, Action::expert_input_grad, Action::expert_weight_grad})
    EXPECT_EQ(counts.at(a), 2 * passes) << to_string(a);  // fc1 and fc2
  EXPECT_EQ(counts.at(Action::linear_forward), 8 * (4 * 2 + 1));  // qkv, projection; the output layer
  EXPECT_EQ(counts.count(Action::activation_forward), 0u);
  // The router's and each expert stack's gradient is stored by one op per layer and accumulated by the rest.
  std::map<std::pair<int, OpRole>, int> stored;
  const std::vector<OpBinding> bindings = bind_ops(graph.classes[0]);
  for (OpIndex i = 0; i < graph.classes[0].size(); ++i)
    if (bindings[i].first_gradient) ++stored[{graph.classes[0].op(i).layer, bindings[i].subject}];
  for (int layer = 0; layer < 4; ++layer)
    for (OpRole role : {OpRole::router, OpRole::expert_fc1, OpRole::expert_fc2})
      EXPECT_EQ((stored[{layer, role}]), 1) << layer << " " << to_string(role);
}

// Tied embeddings on one stage: the output projection's weight gradient (first in the backward) stores the
// table's gradient and the embedding backward adds to it; untied, each stores its own.
TEST(OpBinding, TiedEmbeddingsStoreTheTablesGradientOnce) {
  Strategy s = testing::make_strategy(1, 1, 1, false);
  Scenario scenario = testing::make_scenario(testing::llama_shaped(2), 1, 1024, 16);
  scenario.cluster.node_groups[0].gpus_per_node = 1;
  scenario.model.untie_embeddings_and_output_weights = false;
  const IterationGraph graph = lower(s, scenario);
  for (bool tied : {true, false}) {
    const std::vector<OpBinding> bindings = bind_ops(graph.classes[0], tied);
    int output_first = 0, embedding_first = 0;
    for (const OpBinding& b : bindings) {
      output_first += b.first_gradient && b.subject == OpRole::output_projection;
      embedding_first += b.first_gradient && b.action == Action::embedding_backward;
    }
    EXPECT_EQ(output_first, 1) << tied;
    EXPECT_EQ(embedding_first, tied ? 0 : 1) << tied;
  }
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

// Double strand on one stage binds the ops 1F1B binds, only placed differently: the same (action, subject, layer,
// micro-batch) once each, every backward compute op on compute2, each weight's gradient stored once. Over
// stages its passes' p2p carry two tensors in one message: refused.
TEST(OpBinding, DoubleStrandBindsTheOpsOfOneFOneB) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 64);
  scenario.cluster.node_groups[0].gpus_per_node = 1;
  Strategy one_f_one_b = testing::make_strategy(1, 1, 1, false);
  one_f_one_b.micro_batch_size = 16;
  Strategy strands = one_f_one_b;
  strands.schedule = Schedule::double_strand;
  const RankClass plain = lower(one_f_one_b, scenario).classes[0];
  const RankClass folded = lower(strands, scenario).classes[0];
  using Key = std::tuple<Action, OpRole, int, int>;
  const auto keys = [](const RankClass& rc, int* stored, int* on_compute2) {
    std::multiset<Key> result;
    const std::vector<OpBinding> bindings = bind_ops(rc);
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      result.insert({bindings[i].action, bindings[i].subject, op.layer, op.micro_batch});
      *stored += bindings[i].first_gradient;
      if (on_compute2) *on_compute2 += op.stream == Stream::compute2;
      if (op.phase == Phase::backward && !op.is_communication())
        EXPECT_EQ(op.stream, on_compute2 ? Stream::compute2 : Stream::compute) << op_name(op);
      if (op.phase == Phase::forward && on_compute2) EXPECT_NE(op.stream, Stream::compute2) << op_name(op);
    }
    return result;
  };
  int plain_stored = 0, folded_stored = 0, on_compute2 = 0;
  EXPECT_EQ(keys(plain, &plain_stored, nullptr), keys(folded, &folded_stored, &on_compute2));
  EXPECT_EQ(plain_stored, folded_stored);
  EXPECT_GT(on_compute2, 4 * 4 * 10);  // 4 micro-batches of 16 sequences, 4 layers of more than 10 backward ops
  Scenario two = scenario;
  two.cluster.node_groups[0].gpus_per_node = 2;
  // Under TP with SP each strand's collectives bind as 1F1B's do (the pairing keeps two of one kind apart).
  Strategy tensor_parallel = strands;
  tensor_parallel.tensor_model_parallel_size = 2;
  tensor_parallel.sequence_parallel = true;
  Strategy tensor_parallel_1f1b = tensor_parallel;
  tensor_parallel_1f1b.schedule = Schedule::one_f_one_b;
  int stored_tp = 0, stored_tp_1f1b = 0, on_compute2_tp = 0;
  EXPECT_EQ(keys(lower(tensor_parallel_1f1b, two).classes[0], &stored_tp_1f1b, nullptr),
            keys(lower(tensor_parallel, two).classes[0], &stored_tp, &on_compute2_tp));
  EXPECT_EQ(stored_tp, stored_tp_1f1b);
}

// Over stages (the folded pipeline) each pass's transfer carries its forward strand's activation and its backward
// strand's gradient: the two ends of every transfer (equal p2p tags) name the same pass, so they agree on both
// micro-batches, and each stage moves every micro-batch's activation and gradient across each boundary once.
TEST(OpBinding, DoubleStrandTransfersOverStagesPairUp) {
  for (int stages : {2, 4}) {
    Scenario scenario = testing::make_scenario(testing::llama_shaped(8), 1, 1024, 32);
    scenario.cluster.node_groups[0].gpus_per_node = stages;
    Strategy strands = testing::make_strategy(1, stages, 1, false);
    strands.micro_batch_size = 4;
    strands.schedule = Schedule::double_strand;
    const IterationGraph graph = lower(strands, scenario);
    const int micro_batches = 8;  // 32 sequences of micro-batch 4 on one pipeline
    struct End {
      StrandStep step;
      int stage = 0;
    };
    std::map<std::int64_t, std::vector<End>> ends;  // p2p tag -> its send and recv
    std::map<std::tuple<int, int, bool>, int> moved;  // (stage, micro-batch, gradient) -> tensors sent
    for (const RankClass& rc : graph.classes) {
      const std::vector<OpBinding> bindings = bind_ops(rc);
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        if (op.group != GroupKind::pipeline) continue;
        const bool send = bindings[i].action == Action::send_strands;
        ASSERT_TRUE(send || bindings[i].action == Action::recv_strands) << op_name(op);
        const StrandStep step = double_strand_step(stages, micro_batches, op.chunk,
                                                   op.role == OpRole::pipeline_activation, op.micro_batch);
        const int tensors = (step.forward_micro_batch >= 0) + (step.backward_micro_batch >= 0);
        EXPECT_EQ(op.bytes, tensors * std::int64_t{4} * 1024 * scenario.model.hidden_size * 2) << op_name(op);
        ends[op.p2p_tag].push_back({step, rc.stage});
        if (!send) continue;
        if (step.forward_micro_batch >= 0) ++moved[{rc.stage, step.forward_micro_batch, false}];
        if (step.backward_micro_batch >= 0) ++moved[{rc.stage, step.backward_micro_batch, true}];
      }
    }
    for (const auto& [tag, pair] : ends) {
      ASSERT_EQ(pair.size(), 2u) << tag;
      EXPECT_EQ(pair[0].step.forward_micro_batch, pair[1].step.forward_micro_batch) << tag;
      EXPECT_EQ(pair[0].step.backward_micro_batch, pair[1].step.backward_micro_batch) << tag;
      EXPECT_EQ(pair[0].step.down, pair[1].step.down) << tag;
    }
    // Stage 0 sends each activation down once and each gradient down once (the fold's up passes send to it);
    // a middle stage sends each twice each way (down and up), the last stage only up.
    for (int stage = 0; stage < stages; ++stage)
      for (int mb = 0; mb < micro_batches; ++mb)
        for (bool gradient : {false, true})
          EXPECT_EQ((moved[{stage, mb, gradient}]), stage == 0 || stage == stages - 1 ? 1 : 2)
              << stages << " stages, stage " << stage << " micro-batch " << mb << (gradient ? " gradient" : "");
  }
}

// Expert parallelism with TP (SP) and data parallelism: every op binds; the four all-to-alls once per micro-batch
// and MoE layer, each direction in its pass; the experts' gradients reduced (and their weights gathered) over the
// expert-data group, the rest over the data group.
TEST(OpBinding, BindsExpertParallelism) {
  Scenario moe = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);  // 8 GPUs
  Strategy s = testing::make_strategy(2, 1, 1, true);
  s.expert_model_parallel_size = 2;
  s.zero_stage = 1;
  const RankClass rc = lower(s, moe).classes[0];
  const std::vector<OpBinding> bindings = bind_ops(rc);
  std::map<Action, int> count;
  int expert_data_reductions = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    ++count[bindings[i].action];
    if (op.kind == OpKind::all_to_all) {
      EXPECT_EQ(op.group, GroupKind::expert);
      EXPECT_EQ(op.stream, Stream::ep_comm);
      const bool forward = op.phase == Phase::forward;
      const Action action = bindings[i].action;
      EXPECT_EQ(forward, action == Action::dispatch_exchange || action == Action::combine_exchange) << op_name(op);
    }
    expert_data_reductions += op.group == GroupKind::expert_data && bindings[i].action == Action::grad_reduce;
  }
  int micro_batches = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) micro_batches = std::max(micro_batches, rc.op(i).micro_batch + 1);
  const int passes = micro_batches * 4;  // micro-batches x MoE layers
  EXPECT_EQ(count[Action::router_forward], passes);
  for (Action a : {Action::dispatch_exchange, Action::combine_exchange, Action::dispatch_exchange_backward,
                   Action::combine_exchange_backward})
    EXPECT_EQ(count[a], passes) << to_string(a);
  EXPECT_EQ(expert_data_reductions, 4);  // one per MoE layer
}

TEST(OpBinding, RefusesWhatTheExecutorDoesNotRun) {
  // Context parallelism: ring attention's exchange and its split blocks.
  EXPECT_THROW(bind_ops(lower(testing::make_strategy(1, 1, 2, false)).classes[0]), std::invalid_argument);
  // An all-to-all that is not expert parallelism's (Ulysses' re-layout).
  RankClass lone;
  Op op;
  op.kind = OpKind::all_to_all;
  op.role = OpRole::tp_gather;
  op.group = GroupKind::tensor;
  lone.add(op);
  try {
    bind_ops(lone);
    ADD_FAILURE() << "a Ulysses all-to-all was bound";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Ulysses"), std::string::npos) << e.what();
  }
}

// Hot switching: each phase's class binds as its uniform lowering does, packed attention is not taken for a
// context-parallel block, and the handoffs between phases bind to nothing to run. Re-sharding transfers (a
// phase in another layout) and a separate gradient accumulation are refused by name.
TEST(OpBinding, HotSwitchingPhasesBindTheirOpsAndHandoffs) {
  const nlohmann::json document = testing::plan_document(testing::one_gpu_scenario(), "hot-switch:");
  const Plan plan = parse_plan(document, "best.json");
  const PlanGraphs lowered = plan_graphs(plan, "best.json");
  int handoffs = 0;
  for (const RankClass& rc : lowered.graph.classes) {
    const std::vector<OpBinding> bindings = bind_ops(rc);
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).role == OpRole::phase_handoff) {
        EXPECT_EQ(bindings[i].action, Action::phase_handoff);
        ++handoffs;
      }
  }
  EXPECT_EQ(handoffs, 2);
  const PlanGraphs packed =
      plan_graphs(parse_plan(testing::plan_document(testing::one_gpu_scenario(), "static-packed:"), "best.json"),
                  "best.json");
  EXPECT_NO_THROW(bind_ops(packed.graph.classes.at(0)));

  RankClass transfer = lowered.graph.classes.at(1);
  Op weights;
  weights.kind = OpKind::recv;
  weights.role = OpRole::param_gather;
  weights.stream = Stream::dp_comm;
  transfer.add(weights);
  EXPECT_THROW(bind_ops(transfer), std::invalid_argument);
  RankClass accumulation = lowered.graph.classes.at(1);
  Op add;
  add.kind = OpKind::elementwise;
  add.phase = Phase::backward;
  accumulation.add(add);
  EXPECT_THROW(bind_ops(accumulation), std::invalid_argument);
}

// Each action's name is its enumerator's (the table is in declaration order; the count is checked at compile time).
TEST(OpBinding, ActionNamesFollowTheEnumeration) {
  EXPECT_EQ(to_string(Action::embedding_forward), "embedding_forward");
  EXPECT_EQ(to_string(Action::send_strands), "send_strands");
  EXPECT_EQ(to_string(Action::recv_strands), "recv_strands");
  EXPECT_EQ(to_string(Action::routing_counts_reduce), "routing_counts_reduce");
  EXPECT_EQ(to_string(Action::dispatch_exchange), "dispatch_exchange");
  EXPECT_EQ(to_string(Action::combine_exchange_backward), "combine_exchange_backward");
  EXPECT_EQ(to_string(Action::phase_handoff), "phase_handoff");
}

}  // namespace
}  // namespace twin::exec
