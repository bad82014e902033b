// The executor's reading of the families' op graphs: an MoE layer's ops on one GPU and under expert
// parallelism, double strand on one stage and over stages, hot switching's phases and handoffs, a per-layer
// plan's Ulysses layers, an asymmetric plan's rings across pipelines.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "executor/op_binding.hpp"
#include "strategies/schedule.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "tests/executor/asymmetric_fixtures.hpp"
#include "../strategies/strategy_fixtures.hpp"
#include "op_binding_fixtures.hpp"
#include "../strategies/hot_switch/hot_switch_fixture.hpp"
#include "../strategies/per_layer/per_layer_fixture.hpp"

namespace twin::exec {
namespace {

using testing_binding::count_actions;
using testing_binding::lower;
using testing_binding::moe_on;

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

// Double strand on one stage binds the ops 1F1B binds, only placed differently: the same (action, subject, layer,
// micro-batch) once each, every backward compute op on compute2, each weight's gradient stored once.
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
// strand's gradient, and says so (Op::strands, as the schedule has the pass): the two ends of every transfer (equal
// p2p tags) carry the same strands, and each stage moves every micro-batch's activation and gradient across each
// boundary once.
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
        EXPECT_EQ(op.transfer, Transfer::strands) << op_name(op);
        EXPECT_EQ(op.strands.forward_micro_batch, step.forward_micro_batch) << op_name(op);
        EXPECT_EQ(op.strands.backward_micro_batch, step.backward_micro_batch) << op_name(op);
        if (step.forward_micro_batch >= 0) EXPECT_EQ(op.strands.forward_chunk, step.forward_chunk()) << op_name(op);
        if (step.backward_micro_batch >= 0) EXPECT_EQ(op.strands.backward_chunk, step.backward_chunk()) << op_name(op);
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

// MoE under TP (SP) and CP: the routing counts are summed over TP, then over CP (Megatron sums them over the TP x CP
// group), each pass's two reductions on the stream of its group; and the ring's ops bind beside the experts'.
TEST(OpBinding, MoeUnderContextParallelismSumsRoutingCountsOverTpThenCp) {
  Scenario moe = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);  // 8 GPUs
  Strategy s = testing::make_strategy(2, 1, 2, true);
  s.expert_model_parallel_size = 2;
  const RankClass rc = lower(s, moe).classes[0];
  const std::vector<OpBinding> bindings = bind_ops(rc);
  std::vector<const Op*> reductions;  // the routing counts' reductions of the first micro-batch's first MoE layer
  int routers = 0, ring_blocks = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    routers += bindings[i].action == Action::router_forward;
    ring_blocks += bindings[i].action == Action::ring_attention_forward;
    if (bindings[i].action == Action::routing_counts_reduce && op.micro_batch == 0 && reductions.size() < 2)
      reductions.push_back(&op);
  }
  ASSERT_EQ(reductions.size(), 2u);
  EXPECT_EQ(reductions[0]->group, GroupKind::tensor);
  EXPECT_EQ(reductions[0]->stream, Stream::tp_comm);
  EXPECT_EQ(reductions[1]->group, GroupKind::context);
  EXPECT_EQ(reductions[1]->stream, Stream::cp_comm);
  EXPECT_EQ(reductions[1]->group_size, 2);
  EXPECT_EQ(reductions[0]->layer, reductions[1]->layer);
  EXPECT_EQ(ring_blocks, 2 * routers);  // CP 2: two blocks per layer forward
}

// Hot switching: each phase's class binds as its uniform lowering does, packed attention is not taken for a
// context-parallel block, and the handoffs between phases bind to nothing to run. Re-sharding transfers (a
// phase in another layout) bind as places of the switch the runtime runs before the part; an elementwise op of
// no known kind (the gradient accumulation lowering version 4 had) is refused.
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

  // A switch's transfer binds by what it says it moves; a receive that does not say is refused, whatever its role.
  RankClass transfer = lowered.graph.classes.at(1);
  Op weights;
  weights.kind = OpKind::recv;
  weights.role = OpRole::param_gather;
  weights.stream = Stream::dp_comm;
  RankClass unsaid = transfer;
  unsaid.add(weights);
  EXPECT_THROW(bind_ops(unsaid), std::invalid_argument);
  weights.transfer = Transfer::switch_weights;
  const OpIndex at = transfer.add(weights);
  EXPECT_EQ(bind_ops(transfer).at(at).action, Action::switch_transfer);
  RankClass accumulation = lowered.graph.classes.at(1);
  Op add;
  add.kind = OpKind::elementwise;
  add.phase = Phase::backward;
  accumulation.add(add);
  EXPECT_THROW(bind_ops(accumulation), std::invalid_argument);
}
// A per-layer plan's Ulysses layer: per micro-batch its two all-to-alls each way, named by the linear tensor they
// move (full recompute repeats the forward pair), and its bytes the sequence layout's whole buffer; a Megatron
// layer beside it has none and no layer change adds one.
TEST(OpBinding, UlyssesLayersExchangeTheirTensorsBetweenLayouts) {
  const Scenario scenario = testing::make_scenario(testing::llama_shaped(3), 1, 1024, 8);  // 8 GPUs
  const PerLayerPlan plan = testing::per_layer_plan(
      1, 8, 1, {3}, {{{4, true}, 1, Recompute::none}, {{2, false}, 0, Recompute::none}, {{4, true}, 3, Recompute::full}});
  const RankClass& rc = lower_per_layer_plan(scenario, plan).classes.at(0);
  const std::vector<OpBinding> bindings = bind_ops(rc);
  std::map<std::tuple<int, Action, OpRole>, int> seen;  // (layer, action, linear)
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (bindings[i].action != Action::ulysses_to_heads && bindings[i].action != Action::ulysses_to_sequence) continue;
    ++seen[{op.layer, bindings[i].action, bindings[i].subject}];
    const int u = plan.layers.at(static_cast<std::size_t>(op.layer)).layout.group;
    EXPECT_EQ(op.group_size, u);
    const std::int64_t rows = 8 * 1024 / 8;  // each GPU's rows in the sequence layout
    const std::int64_t width = bindings[i].subject == OpRole::qkv_projection ? (16 + 2 * 4) * 64 : 16 * 64;
    EXPECT_EQ(op.bytes, rows * width * 2) << op_name(op);
  }
  using A = Action;
  using R = OpRole;
  const std::map<std::tuple<int, Action, OpRole>, int> expected = {
      {{0, A::ulysses_to_heads, R::qkv_projection}, 1},        {{0, A::ulysses_to_sequence, R::attention_projection}, 1},
      {{0, A::ulysses_to_heads, R::attention_projection}, 1},  {{0, A::ulysses_to_sequence, R::qkv_projection}, 1},
      {{2, A::ulysses_to_heads, R::qkv_projection}, 2},        {{2, A::ulysses_to_sequence, R::attention_projection}, 2},
      {{2, A::ulysses_to_heads, R::attention_projection}, 1},  {{2, A::ulysses_to_sequence, R::qkv_projection}, 1}};
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace twin::exec

namespace twin::exec {
namespace {

// An asymmetric plan's classes bind whole: each gradient segment's ring runs its reduction at its first send and,
// under ZeRO-1, its gather at its all-gather half's first send, and marks the other steps; nothing else in it is a
// switch transfer.
TEST(OpBinding, AsymmetricPlansReduceEachSegmentAtItsRingsFirstSend) {
  for (int zero : {0, 1}) {
    const Scenario scenario = testing::asymmetric_scenario(testing::kTp2BesidePp2, true, zero);
    const PlanGraphs lowered = testing::asymmetric_graphs(scenario);
    const int segments = static_cast<int>(gradient_segments(scenario.model, scenario.pipelines).size());
    std::map<int, int> reduces, gathers;  // per segment, over the classes
    for (const RankClass& rc : lowered.graph.classes) {
      const std::vector<OpBinding> bindings = bind_ops(rc);
      for (OpIndex i = 0; i < rc.size(); ++i) {
        EXPECT_FALSE(is_switch_transfer(rc.op(i)));
        if (bindings[i].action == Action::pipelines_reduce) ++reduces[rc.op(i).ring_segment];
        if (bindings[i].action == Action::pipelines_gather) ++gathers[rc.op(i).ring_segment];
        const Transfer t = rc.op(i).transfer;
        if (t == Transfer::pipelines_reduce || t == Transfer::pipelines_gather_gradients ||
            t == Transfer::pipelines_gather_weights)
          EXPECT_TRUE(bindings[i].action == Action::pipelines_reduce || bindings[i].action == Action::pipelines_gather ||
                      bindings[i].action == Action::pipelines_ring_step);
      }
    }
    ASSERT_EQ(static_cast<int>(reduces.size()), segments) << "zero " << zero;
    for (const auto& [segment, count] : reduces) EXPECT_EQ(count, 2) << "segment " << segment << ": one per pipeline";
    EXPECT_EQ(static_cast<int>(gathers.size()), zero == 1 ? segments : 0);
    for (const auto& [segment, count] : gathers) EXPECT_EQ(count, 2) << "segment " << segment << ": one per pipeline";
  }
}

// A weight gradient's GEMM says where its product goes (Op::gemm_output): twin execute stores the first writer's of
// each weight in a step and adds the rest (OpBinding::first_gradient), and the two agree GEMM by GEMM under 1F1B,
// interleaving, double strand, TP with SP and the experts' block, so the simulator prices the GEMMs that run.
TEST(OpBinding, EveryWeightGradientGemmStoresExactlyWhereItsOpSaysItWrites) {
  Scenario dense = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 64);
  dense.cluster.node_groups[0].gpus_per_node = 4;
  Strategy single = testing::make_strategy(1, 1, 1, false);
  single.micro_batch_size = 8;
  Strategy strands = single;
  strands.schedule = Schedule::double_strand;
  Strategy interleaved = testing::make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b);
  interleaved.micro_batch_size = 4;
  Strategy moe = testing::make_strategy(1, 1, 1, false);
  moe.micro_batch_size = 4;
  int added = 0;
  for (const auto& [strategy, scenario] : {std::pair{single, dense}, std::pair{strands, dense},
                                           std::pair{interleaved, dense}, std::pair{moe, moe_on(1)}}) {
    SCOPED_TRACE(strategy.key());
    for (const RankClass& rc : lower(strategy, scenario).classes) {
      const std::vector<OpBinding> bindings = bind_ops(rc);
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        if (op.kind != OpKind::gemm || op.gemm_pass != GemmPass::weight_gradient) continue;
        EXPECT_EQ(bindings[i].first_gradient, op.gemm_output == GemmOutput::written) << op_name(op);
        added += op.gemm_output == GemmOutput::added;
      }
    }
  }
  EXPECT_GT(added, 0);
}

}  // namespace
}  // namespace twin::exec
