// GEMM calibration: the default grid (calibrate/gemm_grid.hpp) plus the exact shapes of a scenario's
// feasible candidates, each timed through cuBLASLt under CUPTI in batches (calibrate/gpu/gemm_batch.hpp), and
// the GEMM efficiency model refitted over all of them (calibrate/gemm_merge.hpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/gemm_merge.hpp"
#include "calibrate/gemm_partial.hpp"
#include "calibrate/gpu/gemm_batch.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "core/op.hpp"
#include "cost/profile.hpp"
#include "gpu/cupti_timer.hpp"

namespace twin::gpu {

using twin::gemm_key;
using twin::GemmCalibration;

// Distinct GEMM shapes of every feasible candidate strategy of the scenario at `path`, in a stable order.
std::vector<GemmShape> scenario_gemm_shapes(const std::string& path);
// `shapes` without repeats, in the order of first appearance (a scenario's shapes may repeat grid shapes).
std::vector<GemmShape> distinct_gemm_shapes(const std::vector<GemmShape>& shapes);

// Seconds of large GEMMs run before GEMMs are measured, so that they are timed at the clocks a hot GPU
// keeps during training.
inline constexpr double kHeatSeconds = 10.0;
// The same where the GPU comes from the sustained-clock loads (about 56 s at its power cap on one H200): enough to fill
// the stream again, not to heat it (2026-12-01: the full heating was 14 s of a 131 s calibration).
inline constexpr double kHeatAfterLoadSeconds = 2.0;
void heat_gpu(GemmBench& bench, CuptiKernelTimer& timer, double seconds);
// A short burst of large GEMMs before each batch (and, in the one-by-one protocol, before each shape): the host's
// gap between batches would otherwise let the GPU cool and clock up.
inline constexpr int kHeaterLaunchesPerShape = 12;
void keep_gpu_hot(GemmBench& bench, CuptiKernelTimer& timer);
// Estimated kernel time of the batches: a burst per batch is about 4% of it.
inline constexpr double kGemmBatchTargetNs = 0.5e9;
inline constexpr std::size_t kGemmBatchMaxShapes = 256;

struct GemmRoundsOptions {
  bool quick = false;
  std::uint32_t seed = 0;
  std::vector<double> cost_ns;       // per shape, what one round of it costs (batches are cut by it); empty: equal
  GemmPartialTimings done;           // (shape, round) timed before (a resumed run): not timed again
  std::function<void()> on_heated;   // once the GPU is hot, before the first batch
  double heat_s = kHeatSeconds;      // the heating before the first round (`quick`: 2 s whatever this says)
  // After every batch: all timings so far, and the batch's share of cost_ns and of the timings; once more at the
  // end with `last` (and nothing new).
  std::function<void(const GemmPartialTimings& timings, double batch_cost_ns, std::size_t batch_timings, bool last)>
      on_batch;
};

// The timing protocol calibration and `twin calibrate --check` share: heat the GPU, then
// gemm_runs(quick).rounds passes over `shapes`, each in the order std::shuffle with mt19937(seed + round)
// gives, in batches (each after keep_gpu_hot's burst, not with `quick`). Returns each shape's timings in round
// order; none when its operands do not fit in half the free device memory.
std::vector<std::vector<GemmTiming>> time_gemm_rounds(const std::vector<GemmShape>& shapes,
                                                      const GemmRoundsOptions& options);

}  // namespace twin::gpu
