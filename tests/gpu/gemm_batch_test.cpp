// The batched GEMM timing (calibrate/gpu/gemm_batch.hpp) against the one-by-one protocol it replaced (a burst of
// large GEMMs, buffers allocated and filled, warm-up, a collect, probe, timed repetitions, probe, a collect, for
// every shape): the same shapes, each time scaled to one SM clock, must agree within the noise of a single timing.
// TWIN_GEMM_BATCH_CSV=FILE writes every shape's two times (docs/CALIBRATION.md records the figures).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <vector>

#include "calibrate/gemm_grid.hpp"
#include "calibrate/gemm_schedule.hpp"
#include "calibrate/gpu/gemm_batch.hpp"
#include "calibrate/gpu/gemm_calibration.hpp"
#include "core/cluster.hpp"
#include "cost/sm_clock.hpp"
#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Every 14th shape of the full grid (303 of 4,243), from 256^3 to the grid's largest.
std::vector<GemmShape> sample_of_grid() {
  const GemmGrid grid = default_gemm_grid(false, *gpu_preset("H200-141GB"));
  std::vector<GemmShape> shapes;
  for (std::size_t i = 0; i < grid.shapes.size(); i += 14) shapes.push_back(grid.shapes[i]);
  return shapes;
}

TEST(GemmBatchTimer, AgreesWithOneByOneTimingOnAGridSample) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs a CUDA GPU";
  const std::vector<GemmShape> shapes = sample_of_grid();
  const GemmRuns runs = gemm_runs(false);
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<Measurement> one_by_one(shapes.size()), batched(shapes.size());
  double one_by_one_s = 0, batched_s = 0;
  {
    GemmBench bench(stream);
    CuptiKernelTimer timer;
    std::size_t free_bytes = 0, total_bytes = 0;
    TWIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    std::vector<std::size_t> order(shapes.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), std::mt19937(7));
    heat_gpu(bench, timer, 3.0);
    auto start = std::chrono::steady_clock::now();
    for (std::size_t i : order) {  // the protocol of twin calibrate before 2026-11-28
      keep_gpu_hot(bench, timer);
      const auto m = bench.measure(shapes[i], timer, runs.warmup, runs.timed, free_bytes / 2);
      ASSERT_TRUE(m.has_value());
      one_by_one[i] = *m;
      one_by_one[i].sm_clock_MHz = bench.last_sm_clock_MHz();
    }
    one_by_one_s = seconds_since(start);
    GemmBatchTimer batches(bench, timer, shapes, free_bytes / 2);
    start = std::chrono::steady_clock::now();
    std::vector<double> cost;
    for (const GemmShape& s : shapes) cost.push_back(13 * estimated_gemm_kernel_ns(s, *gpu_preset("H200-141GB")));
    const auto starts = batch_starts(order, cost, kGemmBatchTargetNs, kGemmBatchMaxShapes);
    for (std::size_t b = 0; b + 1 < starts.size(); ++b) {
      std::vector<GemmShape> batch;
      for (std::size_t v = starts[b]; v < starts[b + 1]; ++v) batch.push_back(shapes[order[v]]);
      const auto timed = batches.time(batch, runs, {8192, 8192, 8192, 1, false, false}, kHeaterLaunchesPerShape);
      for (std::size_t j = 0; j < timed.size(); ++j) {
        ASSERT_TRUE(timed[j].has_value());
        batched[order[starts[b] + j]] = timed[j]->measured;
      }
    }
    batched_s = seconds_since(start);
    EXPECT_EQ(timer.dropped_records(), 0u);
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));

  std::vector<Measurement> all = one_by_one;
  all.insert(all.end(), batched.begin(), batched.end());
  const double reference_MHz = median_sm_clock_MHz(all);
  std::vector<double> differences;  // batched / one by one - 1, both at the reference clock
  std::ofstream csv(std::getenv("TWIN_GEMM_BATCH_CSV") ? std::getenv("TWIN_GEMM_BATCH_CSV") : "/dev/null");
  csv << "m,n,k,transpose_a,transpose_b,one_by_one_us,one_by_one_MHz,batched_us,batched_MHz\n";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const double old_ns = at_sm_clock(one_by_one[i], reference_MHz).median_ns;
    const double new_ns = at_sm_clock(batched[i], reference_MHz).median_ns;
    differences.push_back(new_ns / old_ns - 1);
    csv << shapes[i].m << ',' << shapes[i].n << ',' << shapes[i].k << ',' << shapes[i].transpose_a << ','
        << shapes[i].transpose_b << ',' << one_by_one[i].median_ns * 1e-3 << ',' << one_by_one[i].sm_clock_MHz << ','
        << batched[i].median_ns * 1e-3 << ',' << batched[i].sm_clock_MHz << '\n';
  }
  double mean = 0, mean_abs = 0, max_abs = 0;
  for (double d : differences) mean += d / differences.size(), mean_abs += std::abs(d) / differences.size();
  for (double d : differences) max_abs = std::max(max_abs, std::abs(d));
  std::printf("%zu shapes: one by one %.1f s, batched %.1f s; batched vs one by one at %.0f MHz: mean %+.2f%%, "
              "mean |difference| %.2f%%, max |difference| %.2f%%\n",
              shapes.size(), one_by_one_s, batched_s, reference_MHz, 100 * mean, 100 * mean_abs, 100 * max_abs);
  // What this test holds is that every batched time is the time of its own shape: a region mixed up with another,
  // a probe taken for a GEMM or a unit slip moves shapes by far more than 15% against the others. How close the two
  // protocols come on average is a measurement, not a pass mark (docs/CALIBRATION.md records it: -2.8% at one clock
  // on 2026-11-28 19:40 UTC, -4.7% at 20:35 UTC with 40 CPU processes beside the GPU): the GPU, busy without gaps,
  // runs the batches about 15% below the one-by-one clock and a GEMM follows the clock a little less than in
  // proportion (time ~ clock^-0.91), so the common bias is taken out before the shapes are compared.
  std::vector<double> ratios;
  for (double d : differences) ratios.push_back(1 + d);
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  const double median_ratio = ratios[ratios.size() / 2];
  std::size_t off = 0;
  for (double d : differences) off += std::abs((1 + d) / median_ratio - 1) > 0.15 ? 1 : 0;
  EXPECT_GT(median_ratio, 0.8);
  EXPECT_LT(median_ratio, 1.25);
  EXPECT_LE(off, shapes.size() / 20) << off << " of " << shapes.size() << " shapes more than 15% off the median ratio";
}

}  // namespace
}  // namespace twin::gpu
