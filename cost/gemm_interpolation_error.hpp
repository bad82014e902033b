// How well a profile's measured GEMMs predict GEMM shapes that were not measured: each measured shape priced
// from all the others (leave one shape out), and shapes measured apart from the profile (`twin calibrate
// --check`) priced from the profile. Both on the benchmark basis (benchmark_kernel_time_ns: no in-situ ratio,
// no training clock, no launch overhead), which is what interpolation among micro-benchmarks is asked to give.
#pragma once
#include <vector>

#include "core/cluster.hpp"
#include "cost/profile.hpp"

namespace twin {

// One priced shape: its measured and predicted kernel time (ns) and the error predicted / measured - 1 (%).
struct GemmPredictionError {
  GemmShape shape;
  double measured_ns = 0;
  double predicted_ns = 0;
  double error_pct() const { return 100 * (predicted_ns / measured_ns - 1); }
};

// Every entry of kernels.measured_gemms priced by benchmark_kernel_time_ns from a copy of `kernels` without it,
// in measured_gemms order.
std::vector<GemmPredictionError> leave_one_gemm_out(const GpuKernelProfile& kernels, const GpuSpec& gpu);

// Each measured (shape, time) priced by benchmark_kernel_time_ns from `kernels` as it is.
std::vector<GemmPredictionError> held_out_gemm_errors(const GpuKernelProfile& kernels, const GpuSpec& gpu,
                                                      const std::vector<MeasuredGemm>& held_out);

// Tiles of 128 x 256 (the first of kGemmTiles) over the GPU's SMs: below 1 the GEMM does not fill one wave, and
// cuBLASLt's choice between splitting K and leaving SMs idle makes its time jump between neighbouring shapes.
double gemm_waves(const GemmShape& shape, int sm_count);

}  // namespace twin
