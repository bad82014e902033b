// Engine speed on a synthetic 16-stage GPipe pipeline of ~100k ops (TP all-reduces per layer, p2p
// between stages, DP reduce-scatters and an optimizer step): events per second of the event loop
// alone, and of a whole simulate_iteration (flattening included).
#include <vector>

#include <benchmark/benchmark.h>

#include "cost/profile.hpp"
#include "core/cluster.hpp"
#include "sim/engine.hpp"
#include "sim/flat_graph.hpp"
#include "sim/simulate.hpp"

namespace twin {
namespace {

constexpr int kStages = 16;
constexpr int kMicroBatches = 32;
constexpr int kLayersPerStage = 13;
constexpr int kTensorParallel = 8;
constexpr int kDataParallel = 8;

Cluster bench_cluster() {
  NodeGroup group;
  group.count = kStages * kDataParallel;
  group.gpu = *gpu_preset("H100-SXM-80GB");
  group.gpus_per_node = 8;
  group.intra_node = {IntraNodeKind::nvswitch, 450, 0};
  group.nics = {8, 400, 0};
  Cluster cluster;
  cluster.node_groups.push_back(group);
  return cluster;
}

Op gemm(std::int64_t m, std::int64_t n, std::int64_t k, Phase phase) {
  Op op;
  op.kind = OpKind::gemm;
  op.role = OpRole::fc1;
  op.phase = phase;
  op.gemm = {m, n, k};
  op.flops = 2.0 * m * n * k;
  return op;
}

Op collective(OpKind kind, GroupKind group, int size, Bytes bytes, Stream stream, Phase phase) {
  Op op;
  op.kind = kind;
  op.role = group == GroupKind::tensor ? OpRole::tp_reduce : OpRole::grad_reduce;
  op.phase = phase;
  op.stream = stream;
  op.group = group;
  op.group_size = size;
  op.bytes = bytes;
  return op;
}

Op p2p(OpKind kind, int peer, std::int64_t tag) {
  Op op;
  op.kind = kind;
  op.role = OpRole::pipeline_activation;
  op.stream = kind == OpKind::send ? Stream::pp_send : Stream::pp_recv;
  op.group = GroupKind::pipeline;
  op.group_size = 2;
  op.peer = peer;
  op.p2p_tag = tag;
  op.bytes = 4096LL * 8192 * 2;
  return op;
}

// One layer's worth of GEMMs, every second one followed by its TP all-reduce on the TP stream, which
// the next GEMM waits for. The first GEMM waits for everything in `after`; returns the layer's last op.
OpIndex add_layer(RankClass& stage, std::vector<OpIndex> after, int gemms, Phase phase) {
  const Bytes activation = 4096LL * 8192 * 2;
  OpIndex last = 0;
  for (int g = 0; g < gemms; ++g) {
    const OpIndex compute = stage.add(gemm(4096, 8192 / kTensorParallel * (1 + g % 3), 8192, phase));
    for (OpIndex before : after) stage.add_dependency(before, compute);
    last = compute;
    if (g % 2 == 1) {
      last = stage.add(collective(OpKind::all_reduce, GroupKind::tensor, kTensorParallel, activation,
                                  Stream::tp_comm, phase));
      stage.add_dependency(compute, last);
    }
    after = {last};
  }
  return last;
}

IterationGraph bench_pipeline() {
  IterationGraph graph;
  for (int s = 0; s < kStages; ++s) {
    RankClass& stage = graph.classes.emplace_back();
    stage.index = stage.stage = s;
    stage.first_rank = s * kTensorParallel * kDataParallel;
    stage.num_ranks = kTensorParallel * kDataParallel;
    stage.spans[static_cast<int>(GroupKind::tensor)] = {kTensorParallel, kTensorParallel, 1};
    stage.spans[static_cast<int>(GroupKind::data)] = {kDataParallel, 1, kDataParallel};
    stage.spans[static_cast<int>(GroupKind::pipeline)] = {kStages, 1, kStages};
    std::vector<OpIndex> after;
    for (int j = 0; j < kMicroBatches; ++j) {
      if (s > 0) after.push_back(stage.add(p2p(OpKind::recv, s - 1, j)));
      for (int l = 0; l < kLayersPerStage; ++l) after = {add_layer(stage, after, 4, Phase::forward)};
      if (s < kStages - 1) stage.add_dependency(after.front(), stage.add(p2p(OpKind::send, s + 1, j)));
    }
    for (int j = 0; j < kMicroBatches; ++j) {
      if (s < kStages - 1) after.push_back(stage.add(p2p(OpKind::recv, s + 1, kMicroBatches + j)));
      for (int l = 0; l < kLayersPerStage; ++l) after = {add_layer(stage, after, 6, Phase::backward)};
      if (s > 0) stage.add_dependency(after.front(), stage.add(p2p(OpKind::send, s - 1, kMicroBatches + j)));
    }
    for (int l = 0; l < kLayersPerStage; ++l) {
      const OpIndex sync = stage.add(collective(OpKind::reduce_scatter, GroupKind::data, kDataParallel, 400LL << 20,
                                                Stream::dp_comm, Phase::optimizer));
      stage.add_dependency(after.front(), sync);
      after = {sync};
    }
    Op step;
    step.kind = OpKind::optimizer_step;
    step.role = OpRole::optimizer;
    step.phase = Phase::optimizer;
    step.elements = 1LL << 28;
    stage.add_dependency(after.front(), stage.add(step));
  }
  return graph;
}

void BM_EngineEventLoop(benchmark::State& state) {
  const IterationGraph graph = bench_pipeline();
  const sim::FlatIteration flat = sim::flatten(graph, bench_cluster(), builtin_profile());
  std::uint64_t events = 0;
  for (auto _ : state) {
    const IterationResult result = sim::run_engine(flat, graph, {});
    events += result.events;
    benchmark::DoNotOptimize(result.iteration_ns);
  }
  state.counters["ops"] = static_cast<double>(graph.total_ops());
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineEventLoop)->Unit(benchmark::kMillisecond);

void BM_SimulateIteration(benchmark::State& state) {
  const IterationGraph graph = bench_pipeline();
  const Cluster cluster = bench_cluster();
  std::uint64_t events = 0;
  for (auto _ : state) {
    const IterationResult result = simulate_iteration(graph, cluster, builtin_profile());
    events += result.events;
    benchmark::DoNotOptimize(result.iteration_ns);
  }
  state.counters["ops"] = static_cast<double>(graph.total_ops());
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateIteration)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace twin
