// Lowering sanity: op counts per layer, TP/SP collectives, matched and deadlock-free pipeline transfers,
// gradient reduction per layer, and the FLOPs of the lowered ops against Megatron's formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::make_scenario;
using testing::make_strategy;

IterationGraph lower(const Scenario& sc, Strategy& st) {
  const auto completion = complete_strategy(sc, st);
  EXPECT_EQ(completion, std::nullopt);
  const auto invalid = invalid_reason(sc, st);
  EXPECT_EQ(invalid, std::nullopt) << st.key();
  return lower_to_op_graphs(sc, st);
}

int count(const RankClass& rc, const std::function<bool(const Op&)>& wanted) {
  int n = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) n += wanted(rc.op(i)) ? 1 : 0;
  return n;
}

// Deadlock check under rendezvous semantics: one global graph of every op, with stream order, explicit
// dependencies, and each transfer's send and recv waiting for each other's predecessors.
bool completes(const IterationGraph& g) {
  std::vector<std::size_t> offset;
  std::size_t total = 0;
  for (const RankClass& rc : g.classes) {
    offset.push_back(total);
    total += rc.size();
  }
  std::vector<std::vector<std::size_t>> successors(total);
  std::vector<std::vector<std::size_t>> predecessors(total);
  auto edge = [&](std::size_t a, std::size_t b) {
    successors[a].push_back(b);
    predecessors[b].push_back(a);
  };
  std::map<std::tuple<int, int, std::int64_t>, std::size_t> sends, recvs;
  for (std::size_t c = 0; c < g.classes.size(); ++c) {
    const RankClass& rc = g.classes[c];
    std::vector<std::size_t> last_on_stream(kStreamCount, SIZE_MAX);
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      const std::size_t node = offset[c] + i;
      auto& last = last_on_stream[static_cast<int>(op.stream)];
      if (last != SIZE_MAX) edge(last, node);
      last = node;
      for (auto [e, end] = boost::in_edges(i, rc.graph); e != end; ++e) edge(offset[c] + boost::source(*e, rc.graph), node);
      if (op.kind == OpKind::send && op.group == GroupKind::pipeline) sends[{static_cast<int>(c), op.peer, op.p2p_tag}] = node;
      if (op.kind == OpKind::recv) recvs[{op.peer, static_cast<int>(c), op.p2p_tag}] = node;
    }
  }
  for (const auto& [key, send] : sends) {
    const std::size_t recv = recvs.at(key);
    for (std::size_t before_recv : std::vector<std::size_t>(predecessors[recv])) edge(before_recv, send);
    edge(send, recv);
  }
  std::vector<int> waiting(total, 0);
  for (std::size_t n = 0; n < total; ++n) waiting[n] = static_cast<int>(predecessors[n].size());
  std::vector<std::size_t> ready;
  for (std::size_t n = 0; n < total; ++n)
    if (waiting[n] == 0) ready.push_back(n);
  std::size_t done = 0;
  while (!ready.empty()) {
    const std::size_t n = ready.back();
    ready.pop_back();
    ++done;
    for (std::size_t s : successors[n])
      if (--waiting[s] == 0) ready.push_back(s);
  }
  return done == total;
}

bool layer_op(const Op& op, int layer, Phase phase) {  // the layer's own work, not its gradient reduction
  return op.layer == layer && op.micro_batch == 0 && op.phase == phase && !op.recomputed &&
         op.stream != Stream::dp_comm;
}

TEST(Lowering, OpsPerLayer) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 1, 1024, 8);
  struct Case { int tp; bool sp; int forward, backward; };
  // tp 1: 11 forward ops (norm, qkv, rope, attention, proj, residual, norm, fc1, act, fc2, residual) and
  // 15 backward (each linear splits into dgrad + wgrad). No SP: + 2 all-reduces each way. SP: forward
  // + 2 gathers + 2 scatters; backward + 2 gradient gathers, 2 input re-gathers and 2 scatters.
  for (const Case c : {Case{1, false, 11, 15}, Case{2, false, 13, 17}, Case{2, true, 15, 21}}) {
    Strategy st = make_strategy(c.tp, 1, 1, c.sp);
    const IterationGraph g = lower(sc, st);
    ASSERT_EQ(g.classes.size(), 1u);
    EXPECT_EQ(count(g.classes[0], [](const Op& op) { return layer_op(op, 3, Phase::forward); }), c.forward) << c.tp;
    EXPECT_EQ(count(g.classes[0], [](const Op& op) { return layer_op(op, 3, Phase::backward); }), c.backward) << c.tp;
  }
}

TEST(Lowering, TensorCollectivesOnlyWithTensorParallel) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 1, 1024, 8);
  auto tensor_ops = [](const RankClass& rc, OpKind kind) {
    return count(rc, [kind](const Op& op) { return op.group == GroupKind::tensor && op.kind == kind; });
  };
  Strategy tp1 = make_strategy(1, 1);
  const IterationGraph g1 = lower(sc, tp1);
  EXPECT_EQ(count(g1.classes[0], [](const Op& op) { return op.stream == Stream::tp_comm; }), 0);

  Strategy no_sp = make_strategy(2, 1, 1, false);
  const IterationGraph g2 = lower(sc, no_sp);
  EXPECT_GT(tensor_ops(g2.classes[0], OpKind::all_reduce), 0);
  EXPECT_EQ(tensor_ops(g2.classes[0], OpKind::all_gather), 0);
  EXPECT_EQ(tensor_ops(g2.classes[0], OpKind::reduce_scatter), 0);

  Strategy sp = make_strategy(2, 1, 1, true);
  const IterationGraph g3 = lower(sc, sp);
  EXPECT_GT(tensor_ops(g3.classes[0], OpKind::all_gather), 0);
  EXPECT_GT(tensor_ops(g3.classes[0], OpKind::reduce_scatter), 0);
  // Only the loss's max/sum all-reduce remains (one per micro-batch).
  EXPECT_EQ(count(g3.classes[0], [](const Op& op) { return op.group == GroupKind::tensor && op.kind == OpKind::all_reduce && op.role != OpRole::loss; }), 0);
  EXPECT_EQ(count(g3.classes[0], [](const Op& op) { return op.role == OpRole::loss && op.kind == OpKind::all_reduce; }),
            sp.num_micro_batches);
  // The next compute op waits for a forward TP collective: it is exposed unless other streams have work.
  const RankClass& rc = g3.classes[0];
  for (OpIndex i = 0; i < rc.size(); ++i)
    if (rc.op(i).role == OpRole::tp_scatter && rc.op(i).phase == Phase::forward) {
      EXPECT_EQ(boost::out_degree(i, rc.graph), 1u);
      break;
    }
}

std::vector<Strategy> pipeline_cases() {
  std::vector<Strategy> cases;
  cases.push_back(make_strategy(2, 4));
  cases.push_back(make_strategy(2, 4, 1, true, 1, Schedule::gpipe));
  cases.push_back(make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b));
  cases.push_back(make_strategy(1, 4, 1, false, 2, Schedule::interleaved_1f1b));
  cases.push_back(make_strategy(2, 2, 2));
  Strategy z3 = make_strategy(2, 2);
  z3.zero_stage = 3;
  z3.recompute = Recompute::full;
  cases.push_back(z3);
  Strategy selective = make_strategy(4, 2, 2, true, 2, Schedule::interleaved_1f1b);
  selective.recompute = Recompute::selective;
  selective.zero_stage = 1;
  cases.push_back(selective);
  return cases;
}

TEST(Lowering, PipelineTransfersMatchAndComplete) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 2, 1024, 32);
  for (Strategy st : pipeline_cases()) {
    const IterationGraph g = lower(sc, st);
    EXPECT_NO_THROW(check_well_formed(g)) << st.key();
    EXPECT_TRUE(completes(g)) << st.key();
    EXPECT_EQ(g.classes.size(), static_cast<std::size_t>(st.pipeline_model_parallel_size));
    for (const RankClass& rc : g.classes) {
      EXPECT_EQ(rc.num_ranks, st.tensor_model_parallel_size * st.context_parallel_size * st.data_parallel_size);
      EXPECT_EQ(rc.label, "stage " + std::to_string(rc.stage));
    }
  }
}

TEST(Lowering, InterleavedLastStageFeedsTheFirst) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 1, 1024, 16);
  Strategy st = make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b);
  const IterationGraph g = lower(sc, st);
  const RankClass& last = g.classes[1];
  EXPECT_EQ(count(last, [](const Op& op) {
              return op.kind == OpKind::send && op.role == OpRole::pipeline_activation && op.chunk == 0 && op.peer == 0;
            }),
            st.num_micro_batches);
  EXPECT_EQ(count(last, [](const Op& op) { return op.kind == OpKind::send && op.chunk == 1 && op.phase == Phase::forward; }), 0);
  // Activation bytes: T/tp rows (SP) of h bf16 values.
  for (OpIndex i = 0; i < last.size(); ++i) {
    if (last.op(i).kind == OpKind::recv) {
      EXPECT_EQ(last.op(i).bytes, 1024 / 2 * 1024 * 2);
    }
  }
}

// ZeRO-0/1 reduce each unit once, in its last micro-batch; ZeRO-2/3 keep only their gradient shard and reduce-scatter
// each unit in every micro-batch's backward.
TEST(Lowering, GradientsReduceOncePerLayerBelowZero2AndEveryMicroBatchFromIt) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 1, 1024, 16);  // 8 GPUs
  for (int zero : {0, 1, 2, 3}) {
    Strategy st = make_strategy(2, 2);  // dp 2
    st.zero_stage = zero;
    const IterationGraph g = lower(sc, st);
    const OpKind kind = zero == 0 ? OpKind::all_reduce : OpKind::reduce_scatter;
    const int reductions_per_unit = zero >= 2 ? st.num_micro_batches : 1;
    ASSERT_GT(st.num_micro_batches, 1);
    // 4 layers per stage, plus the embedding (stage 0) or the output layer (stage 1).
    for (const RankClass& rc : g.classes) {
      EXPECT_EQ(count(rc, [kind](const Op& op) { return op.role == OpRole::grad_reduce && op.kind == kind && op.group == GroupKind::data; }), 5 * reductions_per_unit);
      EXPECT_EQ(count(rc, [](const Op& op) { return op.kind == OpKind::optimizer_step && op.phase == Phase::optimizer; }), 1);
      const int final_gathers = count(rc, [](const Op& op) { return op.role == OpRole::param_gather && op.phase == Phase::optimizer; });
      EXPECT_EQ(final_gathers, 0);  // overlap_param_gather (the default): none after the step
      const int gathers = count(rc, [](const Op& op) { return op.role == OpRole::param_gather && op.phase != Phase::optimizer; });
      // ZeRO-3 before every use; ZeRO-1/2 once per unit at the iteration's start (the previous step's weights).
      EXPECT_EQ(gathers, zero == 3 ? 2 * 5 * st.num_micro_batches : zero >= 1 ? 5 : 0);
    }
  }
  // Without the overlaps: ZeRO-1 gathers everything after the step, and the reductions wait for the backward.
  Scenario no_overlap = sc;
  no_overlap.framework.overlap_grad_reduce = false;
  no_overlap.framework.overlap_param_gather = false;
  Strategy z1 = make_strategy(2, 2);
  z1.zero_stage = 1;
  const IterationGraph plain = lower(no_overlap, z1);
  for (const RankClass& rc : plain.classes) {
    EXPECT_EQ(count(rc, [](const Op& op) { return op.role == OpRole::param_gather && op.phase == Phase::optimizer; }), 1);
    EXPECT_EQ(count(rc, [](const Op& op) { return op.role == OpRole::param_gather && op.phase != Phase::optimizer; }), 0);
    // Every reduction comes after the last backward op of the compute stream.
    OpIndex last_backward = 0;
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).stream == Stream::compute && rc.op(i).phase == Phase::backward) last_backward = i;
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).role == OpRole::grad_reduce) EXPECT_GT(i, last_backward);
  }
  Strategy no_dp = make_strategy(2, 4);  // dp 1
  const IterationGraph g = lower(sc, no_dp);
  EXPECT_EQ(count(g.classes[0], [](const Op& op) { return op.stream == Stream::dp_comm; }), 0);
}

double flops_of(const IterationGraph& g, bool recomputed) {
  double total = 0;
  for (const RankClass& rc : g.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.phase == Phase::forward && op.recomputed == recomputed) total += op.flops * rc.num_ranks;
    }
  return total;
}

TEST(Lowering, ForwardFlopsMatchMegatronFormula) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 2, 2048, 32);
  for (Strategy st : pipeline_cases()) {
    const IterationGraph g = lower(sc, st);
    const double formula_forward = model_flops_per_iteration(sc) / 3;
    EXPECT_NEAR(flops_of(g, false) / formula_forward, 1.0, 0.01) << st.key();
    const double recomputed = hardware_flops_per_iteration(sc, st.recompute) - model_flops_per_iteration(sc);
    if (st.recompute == Recompute::none)
      EXPECT_EQ(flops_of(g, true), 0.0);
    else
      EXPECT_NEAR(flops_of(g, true) / recomputed, 1.0, 0.01) << st.key();
  }
}

TEST(Lowering, MoeForwardFlopsMatchFormula) {
  const Scenario sc = make_scenario(testing::moe_shaped(), 2, 2048, 32);
  for (int ep : {1, 2, 8}) {
    Strategy st = make_strategy(2, 2);
    st.expert_model_parallel_size = ep;
    const IterationGraph g = lower(sc, st);
    EXPECT_NO_THROW(check_well_formed(g));
    EXPECT_TRUE(completes(g));
    EXPECT_NEAR(flops_of(g, false) / (model_flops_per_iteration(sc) / 3), 1.0, 0.01) << ep;
    const int all_to_alls = count(g.classes[0], [](const Op& op) { return op.kind == OpKind::all_to_all; });
    EXPECT_EQ(all_to_alls, ep > 1 ? 2 * 2 * 2 * st.num_micro_batches : 0);  // 2 layers, dispatch+combine, fwd+bwd
    const int expert_reduces = count(g.classes[0], [](const Op& op) { return op.group == GroupKind::expert_data; });
    const int expert_data = 2 * 4 / ep;  // tp*cp*dp / ep
    EXPECT_EQ(expert_reduces, expert_data > 1 ? 2 : 0);  // one per MoE layer of the stage
  }
}

// Under skewed routing the experts' grouped GEMMs say how many rows their busiest expert gets (its skew times the
// mean expert's), wherever a rank holds several experts; with one expert per rank, or an even routing, none.
TEST(Lowering, SkewedRoutingGivesTheExpertGemmsTheirBusiestGroup) {
  Scenario sc = make_scenario(testing::moe_shaped(), 2, 2048, 32);
  for (auto [ep, imbalance] : {std::pair{1, 3.0}, std::pair{2, 3.0}, std::pair{8, 3.0}, std::pair{1, 1.0}}) {
    sc.model.moe.routing_imbalance = imbalance;
    Strategy st = make_strategy(2, 2);
    st.expert_model_parallel_size = ep;
    const IterationGraph g = lower(sc, st);
    // Per rank: 2048 tokens / TP 2 (SP) x top-2 routed copies; all EP ranks' copies over 8 experts.
    const double mean_rows = 2048.0 / 2 * 2 * ep / 8;
    const std::int64_t expected =
        imbalance > 1 && ep < 8 ? static_cast<std::int64_t>(std::ceil(mean_rows * imbalance)) : 0;
    int expert_gemms = 0;
    for (OpIndex i = 0; i < g.classes[0].size(); ++i) {
      const Op& op = g.classes[0].op(i);
      if (op.role != OpRole::expert_fc1 && op.role != OpRole::expert_fc2) continue;
      if (op.kind != OpKind::gemm) continue;
      ++expert_gemms;
      EXPECT_EQ(op.gemm.busiest, expected) << ep << " " << imbalance << " " << op_name(op);
    }
    EXPECT_GT(expert_gemms, 0);
  }
}

// Speed is a benchmark's (tests/bench), not an assertion: this checks that the large graph is whole.
TEST(Lowering, Llama70bWith128MicroBatchesLowersWhole) {
  const Scenario sc = make_scenario(*model_preset("llama2-70b"), 64, 4096, 1024);
  Strategy st = make_strategy(8, 8);
  st.recompute = Recompute::selective;
  const IterationGraph g = lower(sc, st);
  EXPECT_EQ(st.num_micro_batches, 128);
  EXPECT_GT(g.total_ops(), 300000u);
  EXPECT_NO_THROW(check_well_formed(g));
}

}  // namespace
}  // namespace twin
