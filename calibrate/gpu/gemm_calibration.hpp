// GEMM calibration: the default grid (calibrate/gemm_grid.hpp) plus the exact shapes of a scenario's
// feasible candidates, each timed through cuBLASLt under CUPTI, and the GEMM efficiency model refitted
// over all of them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cupti_timer.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "cost/profile.hpp"
#include "core/op.hpp"

namespace twin::gpu {

// Distinct GEMM shapes of every feasible candidate strategy of the scenario at `path`, in a stable order.
std::vector<GemmShape> scenario_gemm_shapes(const std::string& path);
// The shape as the profile's key names it (kernel_shape_key of a gemm op).
std::string gemm_key(const GemmShape& shape);

struct GemmCalibration {
  std::vector<std::pair<GemmShape, Measurement>> measured;
  std::vector<GemmShape> skipped;  // operands larger than the memory allowed
  SaturatingEfficiency efficiency; // fitted on all measured shapes
  double best_tflops = 0;          // as timed, before scaling to the reference clock
  double reference_sm_clock_MHz = 0; // every measured time is scaled to it (cost/sm_clock.hpp)
};

// Seconds of large GEMMs run before GEMMs are measured, so that they are timed at the clocks a hot GPU
// keeps during training.
inline constexpr double kHeatSeconds = 10.0;
void heat_gpu(GemmBench& bench, CuptiKernelTimer& timer, double seconds);
// A short burst of large GEMMs before each measured shape: a grid of mostly small shapes would otherwise
// let the GPU cool and clock up between them, and time them faster than a training step runs them.
inline constexpr int kHeaterLaunchesPerShape = 12;
void keep_gpu_hot(GemmBench& bench, CuptiKernelTimer& timer);

// One timing of one shape: its measurement, with sm_clock_MHz the clock it ran at, and the cuBLASLt
// kernel(s) CUPTI saw.
struct GemmTiming {
  Measurement measured;
  std::string kernel;
};

// The timing protocol calibration and `twin calibrate --check` share: heat the GPU, then
// gemm_runs(quick).rounds passes over `shapes`, each in the order std::shuffle with mt19937(seed + round)
// gives, every timing after keep_gpu_hot (not with `quick`). Returns each shape's timings, one per round;
// none when its operands do not fit in half the free device memory. `on_timing` follows every timing with
// the shape's index, its position in the round's order and the round.
std::vector<std::vector<GemmTiming>> time_gemm_rounds(
    const std::vector<GemmShape>& shapes, bool quick, std::uint32_t seed,
    const std::function<void(std::size_t shape, std::size_t visit, int round, const GemmTiming&)>& on_timing);

// Times each shape in gemm_runs(quick).rounds passes, each in its own fixed shuffled order on a hot GPU,
// with the SM clock each timing ran at; every time is scaled to the median clock of all timings and each
// shape keeps its median round. `measured` follows the order of first appearance in `shapes`.
GemmCalibration calibrate_gemms(const std::vector<GemmShape>& shapes, double peak_tflops, bool quick,
                                const std::function<void(const std::string&)>& progress);

}  // namespace twin::gpu
