// A hand-built world for the engine's closed-form tests: one GPU kind priced at exactly its HBM
// bandwidth, links at efficiency 1 with no half-work, no overlap slowdown unless a test sets one, so
// that every expected time can be written down exactly.
#pragma once
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "sim/nccl_model.hpp"
#include "sim/simulate.hpp"

namespace twin::test {

inline constexpr double kIntraGBps = 100;   // per GPU, per direction
inline constexpr int kGpusPerNode = 8;

inline GpuSpec test_gpu() {
  GpuSpec gpu;
  gpu.name = "Test-GPU";
  gpu.peak_bf16_tflops = 1000;
  gpu.peak_fp32_tflops = 100;
  gpu.memory_GiB = 80;
  gpu.hbm_bandwidth_GBps = 1000;  // an elementwise op of B bytes: B / 1000 ns
  gpu.nvlink_bandwidth_GBps = kIntraGBps;
  gpu.pcie_bandwidth_GBps = 50;
  gpu.sm_count = 100;
  return gpu;
}

// `nodes` nodes of 8 GPUs, NVSwitch at 100 GB/s, 8 NICs of 400 Gb/s (50 GB/s per GPU), no declared latency.
inline Cluster test_cluster(int nodes) {
  NodeGroup group;
  group.count = nodes;
  group.gpu = test_gpu();
  group.gpus_per_node = kGpusPerNode;
  group.intra_node = {IntraNodeKind::nvswitch, kIntraGBps, 0};
  group.nics = {8, 400, 0};
  Cluster cluster;
  cluster.node_groups.push_back(group);
  return cluster;
}

inline double inter_GBps(const Cluster& cluster) {
  return inter_node_bandwidth_per_gpu_GBps(cluster.node_groups[0], cluster.network);
}

inline Profile test_profile(double intra_latency_us = 0, double inter_latency_us = 0) {
  Profile profile;
  profile.name = "test";
  GpuKernelProfile kernels;
  kernels.gpu = test_gpu().name;
  kernels.gemm = {1.0, 0};
  kernels.attention_forward = {1.0, 0};
  kernels.attention_backward = {1.0, 0};
  kernels.memory_bound = {1.0, 0};
  kernels.launch_overhead_ns = 0;
  profile.gpus.push_back(kernels);
  profile.intra_node = {intra_latency_us, {1.0, 0}};
  profile.intra_node_pcie = {intra_latency_us, {1.0, 0}};
  profile.inter_node = {inter_latency_us, {1.0, 0}};
  profile.overlap = {1.0, 1.0};
  return profile;
}

// A memory-bound op: with the test GPU it takes bytes / 1000 ns.
inline Op compute_op(Bytes bytes, Phase phase = Phase::forward) {
  Op op;
  op.kind = OpKind::elementwise;
  op.role = OpRole::mlp_residual;
  op.phase = phase;
  op.stream = Stream::compute;
  op.bytes = bytes;
  return op;
}

inline TimeNs duration_of(const Profile& profile, const Op& op) { return compute_time_ns(profile, test_gpu(), op); }

inline Op collective_op(OpKind kind, GroupKind group, int group_size, Bytes bytes, Stream stream) {
  Op op;
  op.kind = kind;
  op.role = OpRole::tp_reduce;
  op.stream = stream;
  op.group = group;
  op.group_size = group_size;
  op.bytes = bytes;
  return op;
}

// A ring-attention exchange: `bytes` to the CP neighbour, with no recv.
inline Op ring_send_op(Bytes bytes, Stream stream = Stream::cp_comm) {
  Op op;
  op.kind = OpKind::send;
  op.role = OpRole::cp_exchange;
  op.stream = stream;
  op.group = GroupKind::context;
  op.group_size = 2;
  op.bytes = bytes;
  op.transfer = Transfer::context_ring;
  return op;
}

inline Op pipeline_op(OpKind kind, int peer, std::int64_t tag, Bytes bytes) {
  Op op;
  op.kind = kind;
  op.role = OpRole::pipeline_activation;
  op.stream = kind == OpKind::send ? Stream::pp_send : Stream::pp_recv;
  op.group = GroupKind::pipeline;
  op.group_size = 2;
  op.peer = peer;
  op.p2p_tag = tag;
  op.bytes = bytes;
  return op;
}

inline RankClass& add_class(IterationGraph& graph, int first_rank) {
  RankClass& rank_class = graph.classes.emplace_back();
  rank_class.index = static_cast<int>(graph.classes.size()) - 1;
  rank_class.stage = rank_class.index;
  rank_class.first_rank = first_rank;
  rank_class.label = "stage " + std::to_string(rank_class.index);
  return rank_class;
}

inline void set_span(RankClass& rank_class, GroupKind group, int size, int ranks_per_node, int nodes) {
  rank_class.spans[static_cast<int>(group)] = {size, ranks_per_node, nodes};
}

// NCCL's fastest ring alone (sim/nccl_model.hpp) over one link of `link_GBps`, in ns: an unmeasured
// all-reduce, reduce-scatter or all-gather inside one node, or with one rank per node.
inline double nccl_ring_alone_ns(OpKind kind, const GroupSpan& span, double bytes, double link_GBps) {
  const double traffic = (kind == OpKind::all_reduce ? 2.0 : 1.0) * (span.size - 1) * bytes / span.size;
  double best = INFINITY;
  for (sim::NcclProtocol protocol : sim::kNcclProtocols)
    best = std::min(best, sim::nccl_latency_us(sim::NcclAlgorithm::ring, protocol, kind, span, {}) * 1e3 +
                              traffic / sim::nccl_bandwidth_factor(sim::NcclAlgorithm::ring, protocol, bytes) / link_GBps);
  return best;
}

inline IterationResult simulate(const IterationGraph& graph, const Cluster& cluster, const Profile& profile) {
  SimOptions options;
  options.record_op_timings = true;
  return simulate_iteration(graph, cluster, profile, options);
}

}  // namespace twin::test
