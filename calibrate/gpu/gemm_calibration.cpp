// Shapes are deduplicated through an ordered set of their keys' fields so the order (and the profile's
// bytes) depends only on the inputs.
#include "calibrate/gpu/gemm_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "calibrate/gemm_grid.hpp"
#include "calibrate/gemm_schedule.hpp"
#include "core/scenario.hpp"
#include "gpu/checks.hpp"
#include "strategies/search.hpp"

namespace twin::gpu {
namespace {

// A shape's fields the profile's key names (FP8 operands included: an FP8 GEMM is timed as such).
using ShapeTuple = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int32_t, bool, bool, GemmInputs, bool>;
ShapeTuple tuple_of(const GemmShape& s) {
  return {s.m, s.n, s.k, s.count, s.transpose_a, s.transpose_b, s.inputs, s.e5m2};
}
GemmShape shape_of(const ShapeTuple& t) {
  GemmShape s{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t), std::get<5>(t)};
  s.inputs = std::get<6>(t);
  s.e5m2 = std::get<7>(t);
  return s;
}

GemmShape heater_shape() {
  GemmShape large;
  large.m = large.n = large.k = 8192;
  return large;
}

// The shapes of a round still to time, in the round's shuffled order.
std::vector<std::size_t> round_todo(std::size_t count, std::uint32_t seed, int round, const std::vector<bool>& too_large,
                                    const GemmPartialTimings& timings) {
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(seed + round));
  std::vector<std::size_t> todo;
  for (std::size_t i : order)
    if (!too_large[i] && !timings.count({i, round})) todo.push_back(i);
  return todo;
}

}  // namespace

std::vector<GemmShape> scenario_gemm_shapes(const std::string& path) {
  const Scenario scenario = load_scenario(path);
  std::set<ShapeTuple> shapes;
  for_each_candidate_op(scenario, [&](const Op& op) {
    if (op.kind != OpKind::gemm) return;
    for (const Op& part : gemm_group_parts(op)) shapes.insert(tuple_of(part.gemm));  // what pricing looks up
  });
  std::vector<GemmShape> out;
  for (const ShapeTuple& t : shapes) out.push_back(shape_of(t));
  return out;
}

std::vector<GemmShape> distinct_gemm_shapes(const std::vector<GemmShape>& shapes) {
  std::vector<GemmShape> distinct;
  std::set<ShapeTuple> seen;
  for (const GemmShape& shape : shapes)
    if (seen.insert(tuple_of(shape)).second) distinct.push_back(shape);
  return distinct;
}

void heat_gpu(GemmBench& bench, CuptiKernelTimer& timer, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) bench.measure(heater_shape(), timer, 0, 50, SIZE_MAX);
}

void keep_gpu_hot(GemmBench& bench, CuptiKernelTimer& timer) {
  bench.measure(heater_shape(), timer, 0, kHeaterLaunchesPerShape, SIZE_MAX);
}

std::vector<std::vector<GemmTiming>> time_gemm_rounds(const std::vector<GemmShape>& shapes,
                                                      const GemmRoundsOptions& options) {
  const GemmRuns runs = gemm_runs(options.quick);
  std::vector<double> cost_ns = options.cost_ns;
  if (cost_ns.size() != shapes.size()) cost_ns.assign(shapes.size(), 1.0);
  GemmPartialTimings timings;  // every round of every shape, kernels' names beside
  std::map<std::pair<std::size_t, int>, std::string> kernels;
  for (const auto& [at, m] : options.done)
    if (at.first < shapes.size() && at.second < runs.rounds) timings[at] = m;
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    GemmBench bench(stream);
    CuptiKernelTimer timer;
    std::size_t free_bytes = 0, total_bytes = 0;
    TWIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    std::vector<GemmShape> arena_shapes = shapes;
    arena_shapes.push_back(heater_shape());
    GemmBatchTimer batches(bench, timer, arena_shapes, free_bytes / 2);
    // Training keeps the GPU hot, and a GPU's clocks fall as it heats: measure it hot, and in a fixed
    // shuffled order per round, so that any drift left is spread over all sizes instead of landing on the
    // last ones.
    heat_gpu(bench, timer, options.quick ? 2.0 : options.heat_s);
    if (options.on_heated) options.on_heated();
    std::vector<bool> too_large(shapes.size(), false);
    for (int round = 0; round < runs.rounds; ++round) {
      const std::vector<std::size_t> todo = round_todo(shapes.size(), options.seed, round, too_large, timings);
      const std::vector<std::size_t> starts = batch_starts(todo, cost_ns, kGemmBatchTargetNs, kGemmBatchMaxShapes);
      for (std::size_t b = 0; b + 1 < starts.size(); ++b) {
        std::vector<GemmShape> batch;
        double batch_cost_ns = 0;
        for (std::size_t v = starts[b]; v < starts[b + 1]; ++v) {
          batch.push_back(shapes[todo[v]]);
          batch_cost_ns += cost_ns[todo[v]];
        }
        const auto timed = batches.time(batch, runs, heater_shape(), options.quick ? 0 : kHeaterLaunchesPerShape);
        for (std::size_t j = 0; j < timed.size(); ++j) {
          const std::size_t i = todo[starts[b] + j];
          if (!timed[j]) {
            too_large[i] = true;
            continue;
          }
          timings[{i, round}] = timed[j]->measured;
          kernels[{i, round}] = timed[j]->kernel;
        }
        if (options.on_batch) options.on_batch(timings, batch_cost_ns, batch.size(), false);
      }
    }
    if (options.on_batch) options.on_batch(timings, 0, 0, true);
    if (timer.dropped_records() > 0)
      throw std::runtime_error(fmt::format("CUPTI dropped {} activity records: GEMM timings are incomplete",
                                           timer.dropped_records()));
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  std::vector<std::vector<GemmTiming>> out(shapes.size());
  for (const auto& [at, m] : timings) out[at.first].push_back({m, kernels[at]});
  return out;
}

}  // namespace twin::gpu
