// The real pipeline schedules replayed by the real engine against the closed forms of the literature:
// with free communication and uniform stages, GPipe and 1F1B take (m + p - 1)(t_f + t_b), and
// interleaved 1F1B has bubble fraction (p - 1) / (v m).
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/schedule.hpp"

namespace twin {
namespace {

// A profile where a memory-bound op of B bytes takes B ns on a GPU of 1 GB/s, and links are free.
Profile exact_profile() {
  Profile profile;
  profile.name = "exact";
  GpuKernelProfile kernels;
  kernels.gpu = "unit";
  kernels.memory_bound = SaturatingEfficiency{1.0, 0.0};
  kernels.gemm = kernels.attention_forward = kernels.attention_backward = SaturatingEfficiency{1.0, 0.0};
  profile.gpus.push_back(kernels);
  profile.intra_node = LinkProfile{0.0, SaturatingEfficiency{1.0, 0.0}};
  profile.inter_node = profile.intra_node;
  return profile;
}

Cluster one_node(int gpus) {
  NodeGroup group;
  group.count = 1;
  group.gpus_per_node = gpus;
  group.gpu.name = "unit";
  group.gpu.hbm_bandwidth_GBps = 1.0;
  group.gpu.memory_GiB = 80;
  group.gpu.peak_bf16_tflops = 1;
  group.intra_node = IntraNodeLink{IntraNodeKind::nvswitch, 1e6, 0.0};
  return Cluster{{group}, Network{}};
}

Op pass(bool forward, int micro_batch, int chunk, TimeNs duration) {
  Op op;
  op.kind = OpKind::elementwise;
  op.phase = forward ? Phase::forward : Phase::backward;
  op.micro_batch = micro_batch;
  op.chunk = static_cast<std::int16_t>(chunk);
  op.bytes = duration;
  return op;
}

Op p2p(OpKind kind, int peer, std::int64_t tag) {
  Op op;
  op.kind = kind;
  op.stream = kind == OpKind::send ? Stream::pp_send : Stream::pp_recv;
  op.group = GroupKind::pipeline;
  op.group_size = 2;
  op.peer = peer;
  op.p2p_tag = tag;
  op.bytes = 0;
  return op;
}

// One op per pass; activations and gradients cross virtual-stage boundaries as zero-byte p2p.
IterationGraph pipeline_graph(Schedule schedule, int stages, int micro_batches, int chunks, TimeNs t_f, TimeNs t_b) {
  auto orders = pipeline_schedule(schedule, stages, micro_batches, chunks);
  int virtual_stages = stages * chunks;
  auto tag = [&](int micro_batch, int boundary, bool forward) {
    return (static_cast<std::int64_t>(micro_batch) * virtual_stages + boundary) * 2 + (forward ? 0 : 1);
  };
  IterationGraph graph;
  for (int s = 0; s < stages; ++s) {
    RankClass& rc = graph.classes.emplace_back();
    rc.index = rc.stage = rc.first_rank = s;
    rc.label = "stage " + std::to_string(s);
    rc.spans[static_cast<int>(GroupKind::pipeline)] = GroupSpan{stages, stages, 1};
    for (const ScheduleStep& step : orders[s]) {
      int v = step.chunk * stages + s;  // this pass's virtual stage
      TimeNs duration = (step.forward ? t_f : t_b) / chunks;
      if (step.forward) {
        OpIndex compute = rc.add(pass(true, step.micro_batch, step.chunk, duration));
        if (v > 0) rc.add_dependency(rc.add(p2p(OpKind::recv, (v - 1) % stages, tag(step.micro_batch, v, true))), compute);
        if (v < virtual_stages - 1) rc.add_dependency(compute, rc.add(p2p(OpKind::send, (v + 1) % stages, tag(step.micro_batch, v + 1, true))));
      } else {
        OpIndex compute = rc.add(pass(false, step.micro_batch, step.chunk, duration));
        if (v < virtual_stages - 1) rc.add_dependency(rc.add(p2p(OpKind::recv, (v + 1) % stages, tag(step.micro_batch, v, false))), compute);
        if (v > 0) rc.add_dependency(compute, rc.add(p2p(OpKind::send, (v - 1) % stages, tag(step.micro_batch, v - 1, false))));
      }
    }
  }
  return graph;
}

// Receives are added before the compute they feed, but after it in vertex order here; the engine must
// only care about dependencies and per-stream order, which these graphs respect.
TimeNs simulate(Schedule schedule, int p, int m, int v, TimeNs t_f, TimeNs t_b) {
  IterationGraph graph = pipeline_graph(schedule, p, m, v, t_f, t_b);
  check_well_formed(graph);
  return simulate_iteration(graph, one_node(p), exact_profile()).iteration_ns;
}

TEST(ScheduleTiming, GpipeTakesMPlusPMinusOneSlots) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 4, 8, 16}) EXPECT_EQ(simulate(Schedule::gpipe, p, m, 1, 3000, 6000), (m + p - 1) * 9000) << p << " " << m;
}

TEST(ScheduleTiming, OneFOneBTakesMPlusPMinusOneSlots) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 4, 8, 16}) EXPECT_EQ(simulate(Schedule::one_f_one_b, p, m, 1, 3000, 6000), (m + p - 1) * 9000) << p << " " << m;
}

TEST(ScheduleTiming, InterleavedBubbleFractionIsPMinusOneOverVM) {
  const TimeNs t_f = 4000, t_b = 8000;  // divisible by every v below
  for (int p : {2, 4})
    for (int v : {2, 4})
      for (int m : {p, 2 * p, 4 * p}) {
        TimeNs ideal = m * (t_f + t_b);
        TimeNs total = simulate(Schedule::interleaved_1f1b, p, m, v, t_f, t_b);
        double bubble_fraction = static_cast<double>(total - ideal) / ideal;
        EXPECT_NEAR(bubble_fraction, (p - 1.0) / (v * m), 1e-9) << "p=" << p << " v=" << v << " m=" << m;
      }
}

}  // namespace
}  // namespace twin
