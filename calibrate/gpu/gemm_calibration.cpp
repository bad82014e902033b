// Shapes are deduplicated through an ordered set of their keys' fields so the order (and the profile's
// bytes) depends only on the inputs.
#include "calibrate/gpu/gemm_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <cstdint>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "calibrate/gemm_grid.hpp"
#include "cost/profile.hpp"
#include "cost/sm_clock.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "core/scenario.hpp"
#include "strategies/search.hpp"

namespace twin::gpu {
namespace {

using ShapeTuple = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int32_t, bool, bool>;
ShapeTuple tuple_of(const GemmShape& s) { return {s.m, s.n, s.k, s.count, s.transpose_a, s.transpose_b}; }
GemmShape shape_of(const ShapeTuple& t) {
  return GemmShape{std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t), std::get<4>(t), std::get<5>(t)};
}

}  // namespace

std::string gemm_key(const GemmShape& shape) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = shape;
  return kernel_shape_key(op);
}

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

namespace {
GemmShape heater_shape() {
  GemmShape large;
  large.m = large.n = large.k = 8192;
  return large;
}
}  // namespace

void heat_gpu(GemmBench& bench, CuptiKernelTimer& timer, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) bench.measure(heater_shape(), timer, 0, 50, SIZE_MAX);
}

void keep_gpu_hot(GemmBench& bench, CuptiKernelTimer& timer) {
  bench.measure(heater_shape(), timer, 0, kHeaterLaunchesPerShape, SIZE_MAX);
}

std::vector<std::vector<GemmTiming>> time_gemm_rounds(
    const std::vector<GemmShape>& shapes, bool quick, std::uint32_t seed,
    const std::function<void(std::size_t shape, std::size_t visit, int round, const GemmTiming&)>& on_timing) {
  std::vector<std::vector<GemmTiming>> timings(shapes.size());
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    GemmBench bench(stream);
    CuptiKernelTimer timer;
    std::size_t free_bytes = 0, total_bytes = 0;
    TWIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const GemmRuns runs = gemm_runs(quick);
    std::vector<bool> too_large(shapes.size(), false);
    // Training keeps the GPU hot, and a GPU's clocks fall as it heats: measure it hot, and in a fixed
    // shuffled order per round, so that any drift left is spread over all sizes instead of landing on the
    // last ones.
    heat_gpu(bench, timer, quick ? 2.0 : kHeatSeconds);
    std::vector<std::size_t> order(shapes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    for (int round = 0; round < runs.rounds; ++round) {
      std::shuffle(order.begin(), order.end(), std::mt19937(seed + round));
      for (std::size_t visit = 0; visit < order.size(); ++visit) {
        const std::size_t i = order[visit];
        if (too_large[i]) continue;
        if (!quick) keep_gpu_hot(bench, timer);
        auto measurement = bench.measure(shapes[i], timer, runs.warmup, runs.timed, free_bytes / 2);
        if (!measurement) {
          too_large[i] = true;
          continue;
        }
        measurement->sm_clock_MHz = bench.last_sm_clock_MHz();
        timings[i].push_back({*measurement, bench.last_kernel()});
        if (on_timing) on_timing(i, visit, round, timings[i].back());
      }
    }
    if (timer.dropped_records() > 0)
      throw std::runtime_error(fmt::format("CUPTI dropped {} activity records: GEMM timings are incomplete",
                                           timer.dropped_records()));
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return timings;
}

GemmCalibration calibrate_gemms(const std::vector<GemmShape>& shapes, double peak_tflops, bool quick,
                                const std::function<void(const std::string&)>& progress) {
  GemmCalibration result;
  std::vector<GemmShape> distinct;  // a scenario's shapes may repeat grid shapes
  std::set<ShapeTuple> seen;
  for (const GemmShape& shape : shapes)
    if (seen.insert(tuple_of(shape)).second) distinct.push_back(shape);
  const int rounds = gemm_runs(quick).rounds;
  const auto timings = time_gemm_rounds(
      distinct, quick, 20261121, [&](std::size_t i, std::size_t visit, int round, const GemmTiming& timing) {
        const GemmShape& shape = distinct[i];
        const Measurement& m = timing.measured;
        const double tflops = gemm_flops(shape) / m.median_ns * 1e-3;
        result.best_tflops = std::max(result.best_tflops, tflops);
        if (progress)
          progress(fmt::format("GEMM {}/{} (round {}/{}) m={} n={} k={} count={} ta={} tb={}: {:.1f} us (p10 {:.1f}, "
                               "p90 {:.1f}) at {:.0f} MHz, {:.0f} TFLOP/s",
                               visit + 1, distinct.size(), round + 1, rounds, shape.m, shape.n, shape.k, shape.count,
                               int(shape.transpose_a), int(shape.transpose_b), m.median_ns * 1e-3, m.p10_ns * 1e-3,
                               m.p90_ns * 1e-3, m.sm_clock_MHz, tflops));
      });
  // Every time at the median clock of all timings (cost/sm_clock.hpp), each shape its median round,
  // and the model fitted on those.
  std::vector<Measurement> all_timings;
  for (const auto& shape_timings : timings)
    for (const GemmTiming& timing : shape_timings) all_timings.push_back(timing.measured);
  result.reference_sm_clock_MHz = median_sm_clock_MHz(all_timings);
  std::vector<double> flops, seconds;
  for (std::size_t i = 0; i < distinct.size(); ++i) {
    if (timings[i].empty()) {
      result.skipped.push_back(distinct[i]);
      continue;
    }
    std::vector<Measurement> shape_rounds;
    for (const GemmTiming& timing : timings[i]) shape_rounds.push_back(timing.measured);
    const Measurement kept = median_round_at_sm_clock(shape_rounds, result.reference_sm_clock_MHz);
    result.measured.emplace_back(distinct[i], kept);
    flops.push_back(gemm_flops(distinct[i]));
    seconds.push_back(kept.median_ns * 1e-9);
  }
  if (result.measured.size() < 2) throw std::runtime_error("fewer than 2 GEMM shapes could be measured");
  result.efficiency = gemm_efficiency_from_fit(fit_affine_relative(flops, seconds), peak_tflops);
  return result;
}

}  // namespace twin::gpu
