// A hand-built two-stage iteration (one pipeline transfer each way) with hand-set op timings, shared by
// the trace and report tests so that they depend on no lowering or simulator numbers.
#pragma once
#include "core/op_graph.hpp"
#include "sim/result.hpp"

namespace twin::testing {

inline Op make_op(OpKind kind, OpRole role, Stream stream, int layer, int micro_batch, Phase phase = Phase::forward) {
  Op op;
  op.kind = kind;
  op.role = role;
  op.stream = stream;
  op.layer = layer;
  op.micro_batch = micro_batch;
  op.phase = phase;
  return op;
}

inline Op make_p2p(OpKind kind, OpRole role, int peer, std::int64_t tag, int micro_batch) {
  Op op = make_op(kind, role, kind == OpKind::send ? Stream::pp_send : Stream::pp_recv, -1, micro_batch);
  op.group = GroupKind::pipeline;
  op.group_size = 2;
  op.peer = peer;
  op.p2p_tag = tag;
  op.bytes = 8 * 1024 * 1024;
  return op;
}

// Stage 0 (ranks 0..3 behave alike) and stage 1 (ranks 4..7).
inline IterationGraph two_stage_graph() {
  IterationGraph graph;
  graph.classes.resize(2);
  RankClass& first = graph.classes[0];
  first.index = 0, first.stage = 0, first.num_ranks = 4, first.first_rank = 0, first.label = "stage 0";
  Op fc1 = make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 0, 0);
  fc1.gemm = {4096, 11008, 4096, 1, false, false};
  fc1.flops = 2.0 * 4096 * 11008 * 4096;
  first.add(fc1);                                                                                       // c0.0
  Op tp = make_op(OpKind::all_reduce, OpRole::tp_reduce, Stream::tp_comm, 0, 0);
  tp.group = GroupKind::tensor, tp.group_size = 2, tp.bytes = 32 * 1024 * 1024;
  first.add(tp);                                                                                        // c0.1
  first.add(make_p2p(OpKind::send, OpRole::pipeline_activation, 1, 7, 0));                              // c0.2
  first.add(make_op(OpKind::gemm, OpRole::fc1, Stream::compute, 0, 0, Phase::backward));                // c0.3
  first.add(make_p2p(OpKind::recv, OpRole::pipeline_gradient, 1, 8, 0));                                // c0.4
  first.add(make_op(OpKind::optimizer_step, OpRole::optimizer, Stream::compute, -1, -1, Phase::optimizer));  // c0.5
  Op dp = make_op(OpKind::reduce_scatter, OpRole::grad_reduce, Stream::dp_comm, -1, -1, Phase::optimizer);
  dp.group = GroupKind::data, dp.group_size = 2, dp.bytes = 64 * 1024 * 1024;
  first.add(dp);                                                                                        // c0.6
  first.add_dependency(1, 2);
  first.add_dependency(4, 3);

  RankClass& second = graph.classes[1];
  second.index = 1, second.stage = 1, second.num_ranks = 4, second.first_rank = 4, second.label = "stage 1";
  second.add(make_p2p(OpKind::recv, OpRole::pipeline_activation, 0, 7, 0));                               // c1.0
  second.add(make_op(OpKind::attention_forward, OpRole::core_attention, Stream::compute, 1, 0));           // c1.1
  second.add(make_op(OpKind::attention_backward, OpRole::core_attention, Stream::compute, 1, 0, Phase::backward));
  second.add(make_p2p(OpKind::send, OpRole::pipeline_gradient, 0, 8, 0));                                 // c1.3
  second.add(make_op(OpKind::optimizer_step, OpRole::optimizer, Stream::compute, -1, -1, Phase::optimizer));
  second.add_dependency(0, 1);
  second.add_dependency(2, 3);
  return graph;
}

// Timings in ns, chosen by hand (sub-microsecond parts exercise the 3-decimal µs conversion).
inline IterationResult two_stage_result() {
  IterationResult result;
  result.classes.resize(2);
  result.classes[0].op_timings = {{0, 1000}, {1000, 1500}, {1500, 2250}, {5000, 6001},
                                  {2250, 5000}, {6001, 7000}, {6001, 6500}};
  result.classes[0].finish_ns = 7000;
  result.classes[0].breakdown = {2001, 500, 3500, 999};
  result.classes[1].op_timings = {{0, 2250}, {2250, 3123}, {3123, 4000}, {4000, 5000}, {5000, 5800}};
  result.classes[1].finish_ns = 5800;
  result.classes[1].breakdown = {1750, 1000, 2250, 800};
  result.iteration_ns = 7000;
  result.critical_class = 0;
  result.breakdown = result.classes[0].breakdown;
  return result;
}

}  // namespace twin::testing
