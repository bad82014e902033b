// A layer's passes copied from the first of their shape (Emitter::emit_pass, strategies/pass_repeats.cpp) against
// the same lowering emitting every pass op by op (PassRepeatsOff): on candidates of every shipped scenario, every
// class holds the same ops, field for field, with the same edges in the same order, and flattens to the same arrays
// (flattening prices a repeated op by its original's price), and the lower bound's compute is the same.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "sim/flat_graph.hpp"
#include "sim/price_cache.hpp"
#include "strategies/lowering.hpp"
#include "strategies/lowering_emitter.hpp"
#include "tests/strategies/shipped_scenarios.hpp"

namespace twin {
namespace {


void expect_same_op(const Op& a, const Op& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.role, b.role);
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.stream, b.stream);
  EXPECT_EQ(a.layer, b.layer);
  EXPECT_EQ(a.micro_batch, b.micro_batch);
  EXPECT_EQ(a.chunk, b.chunk);
  EXPECT_EQ(a.recomputed, b.recomputed);
  EXPECT_EQ(a.gemm_pass, b.gemm_pass);
  EXPECT_EQ(a.gemm.m, b.gemm.m);
  EXPECT_EQ(a.gemm.n, b.gemm.n);
  EXPECT_EQ(a.gemm.k, b.gemm.k);
  EXPECT_EQ(a.gemm.count, b.gemm.count);
  EXPECT_EQ(a.gemm.transpose_a, b.gemm.transpose_a);
  EXPECT_EQ(a.gemm.transpose_b, b.gemm.transpose_b);
  EXPECT_EQ(a.gemm.split, b.gemm.split);
  EXPECT_EQ(a.gemm.busiest, b.gemm.busiest);
  EXPECT_EQ(a.attention.batch, b.attention.batch);
  EXPECT_EQ(a.attention.heads, b.attention.heads);
  EXPECT_EQ(a.attention.kv_heads, b.attention.kv_heads);
  EXPECT_EQ(a.attention.seq_q, b.attention.seq_q);
  EXPECT_EQ(a.attention.seq_kv, b.attention.seq_kv);
  EXPECT_EQ(a.attention.head_dim, b.attention.head_dim);
  EXPECT_EQ(a.attention.causal, b.attention.causal);
  EXPECT_EQ(a.attention.flash, b.attention.flash);
  EXPECT_EQ(a.attention.dropout, b.attention.dropout);
  EXPECT_EQ(a.attention.cudnn, b.attention.cudnn);
  EXPECT_EQ(a.attention.packed, b.attention.packed);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.fuses_residual, b.fuses_residual);
  EXPECT_EQ(a.ring_step, b.ring_step);
  EXPECT_EQ(a.optimizer_precision, b.optimizer_precision);
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.group_size, b.group_size);
  EXPECT_EQ(a.peer, b.peer);
  EXPECT_EQ(a.p2p_tag, b.p2p_tag);
  EXPECT_EQ(a.parameter_unit, b.parameter_unit);
  EXPECT_EQ(a.comm_kernel, b.comm_kernel);
  EXPECT_EQ(a.linear, b.linear);
  EXPECT_EQ(a.linear_tensor, b.linear_tensor);
  EXPECT_EQ(a.flops, b.flops);
}

// Ops field for field; each op's out-edges and in-edges in order; the graph's edge list in order.
void expect_same_class(const RankClass& a, const RankClass& b) {
  ASSERT_EQ(a.size(), b.size());
  for (OpIndex i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("op " + std::to_string(i));
    expect_same_op(a.op(i), b.op(i));
    std::vector<std::size_t> out_a, out_b, in_a, in_b;
    for (auto [e, end] = boost::out_edges(i, a.graph); e != end; ++e) out_a.push_back(boost::target(*e, a.graph));
    for (auto [e, end] = boost::out_edges(i, b.graph); e != end; ++e) out_b.push_back(boost::target(*e, b.graph));
    for (auto [e, end] = boost::in_edges(i, a.graph); e != end; ++e) in_a.push_back(boost::source(*e, a.graph));
    for (auto [e, end] = boost::in_edges(i, b.graph); e != end; ++e) in_b.push_back(boost::source(*e, b.graph));
    ASSERT_EQ(out_a, out_b);
    ASSERT_EQ(in_a, in_b);
  }
  ASSERT_EQ(boost::num_edges(a.graph), boost::num_edges(b.graph));
  for (std::size_t k = 0; k < boost::num_edges(a.graph); ++k) {
    ASSERT_EQ(a.graph.m_edges[k].m_source, b.graph.m_edges[k].m_source) << "edge " << k;
    ASSERT_EQ(a.graph.m_edges[k].m_target, b.graph.m_edges[k].m_target) << "edge " << k;
  }
}

void expect_same_flat(const sim::FlatClass& a, const sim::FlatClass& b) {
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    SCOPED_TRACE("flat op " + std::to_string(i));
    const sim::FlatOp& x = a.ops[i];
    const sim::FlatOp& y = b.ops[i];
    EXPECT_EQ(x.nominal_ns, y.nominal_ns);
    EXPECT_EQ(x.successors_begin, y.successors_begin);
    EXPECT_EQ(x.successors_end, y.successors_end);
    EXPECT_EQ(x.next_in_stream, y.next_in_stream);
    EXPECT_EQ(x.plan, y.plan);
    EXPECT_EQ(x.peer_class, y.peer_class);
    EXPECT_EQ(x.peer_op, y.peer_op);
    EXPECT_EQ(x.message_bytes, y.message_bytes);
    EXPECT_EQ(x.receive_scale, y.receive_scale);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.optimizer, y.optimizer);
    EXPECT_EQ(x.comm_kernel, y.comm_kernel);
  }
  EXPECT_EQ(a.predecessors, b.predecessors);
  EXPECT_EQ(a.successors, b.successors);
  ASSERT_EQ(a.plans.size(), b.plans.size());
  for (std::size_t p = 0; p < a.plans.size(); ++p) {
    EXPECT_EQ(a.plans[p].algorithm, b.plans[p].algorithm);
    EXPECT_EQ(a.plans[p].phase_count, b.plans[p].phase_count);
    for (int k = 0; k < a.plans[p].phase_count; ++k) {
      EXPECT_EQ(a.plans[p].phases[k].latency_ns, b.plans[p].phases[k].latency_ns);
      EXPECT_EQ(a.plans[p].phases[k].flow_count, b.plans[p].phases[k].flow_count);
    }
  }
}

TEST(PassRepeats, CopiedPassesEqualPassesEmittedOpByOpOnCandidatesOfEveryShippedScenario) {
  std::size_t repeated_ops = 0, ops = 0;
  const int checked = testing::check_spread_candidates(
      6, [&](const Scenario& scenario, const Profile& profile, sim::PriceCache& prices, const Strategy& strategy) {
        const IterationGraph copied = lower_to_op_graphs(scenario, strategy, profile);
        IterationGraph op_by_op;
        {
          const lowering::PassRepeatsOff off;
          op_by_op = lower_to_op_graphs(scenario, strategy, profile);
        }
        ASSERT_EQ(copied.classes.size(), op_by_op.classes.size());
        for (std::size_t c = 0; c < copied.classes.size(); ++c) {
          SCOPED_TRACE("class " + std::to_string(c));
          EXPECT_TRUE(op_by_op.classes[c].repeats.empty());
          expect_same_class(copied.classes[c], op_by_op.classes[c]);
          for (const RepeatedOps& r : copied.classes[c].repeats) repeated_ops += r.count;
          ops += copied.classes[c].size();
        }
        const sim::FlatIteration flat_copied = sim::flatten(copied, scenario.cluster, profile, &prices);
        const sim::FlatIteration flat_op_by_op = sim::flatten(op_by_op, scenario.cluster, profile, &prices);
        ASSERT_EQ(flat_copied.classes.size(), flat_op_by_op.classes.size());
        for (std::size_t c = 0; c < flat_copied.classes.size(); ++c) {
          SCOPED_TRACE("flat class " + std::to_string(c));
          expect_same_flat(flat_copied.classes[c], flat_op_by_op.classes[c]);
        }
        const std::vector<sim::ComputeBusy> busy_copied = sim::compute_busy(copied, scenario.cluster, profile, &prices);
        const std::vector<sim::ComputeBusy> busy_op_by_op =
            sim::compute_busy(op_by_op, scenario.cluster, profile, &prices);
        ASSERT_EQ(busy_copied.size(), busy_op_by_op.size());
        for (std::size_t c = 0; c < busy_copied.size(); ++c) {
          SCOPED_TRACE("busy class " + std::to_string(c));
          EXPECT_EQ(busy_copied[c].optimizer_ns, busy_op_by_op[c].optimizer_ns);
          for (const auto& [x, y] : {std::pair{busy_copied[c].passes, busy_op_by_op[c].passes},
                                     std::pair{busy_copied[c].first_chunk, busy_op_by_op[c].first_chunk}}) {
            EXPECT_EQ(x.forward_ns, y.forward_ns);
            EXPECT_EQ(x.backward_ns, y.backward_ns);
            EXPECT_EQ(x.recomputed_ns, y.recomputed_ns);
          }
        }
      });
  EXPECT_GT(checked, 50);
  // Most lowered ops are in repeated passes, or this test checks little.
  EXPECT_GT(repeated_ops * 2, ops) << repeated_ops << " of " << ops << " ops repeated";
}

}  // namespace
}  // namespace twin
