// Predicting the kernel time of a non-GEMM op shape that calibration did not measure, from the measured
// shapes of the same kind: as for GEMMs (gemm_predictor.hpp), the efficiency of the nearest measured shapes
// relative to the profile's model is interpolated and carried over to the query, so that a kind whose
// kernel runs at its own fraction of bandwidth (the optimizer step, the loss) is priced by its own
// measurements rather than by the one memory-bound curve all kinds share.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cost/profile.hpp"
#include "core/op.hpp"

namespace twin {

// The non-GEMM compute entries of a profile's `measured` map on the benchmark basis, in key order
// (GpuKernelProfile::measured_kernels; see benchmark_time_ns).
std::vector<MeasuredKernelShape> index_measured_kernels(const std::map<std::string, Measurement>& measured);

// How many measured shapes of the same kind a prediction uses.
inline constexpr int kKernelNeighbours = 4;

// model_ns(op) * exp(weighted mean of log(measured_ns / model_ns) over the kKernelNeighbours nearest
// measured shapes of op's kind and variant), weights 1 / distance^2, the distance in octaves over the key's
// numbers (cost/shape_space.hpp). An exactly measured shape returns its time; no measured shape of
// the kind returns model_ns(op); a soft-capped loss with no capped shape measured is priced as the plain loss, and an
// optimizer step on an fp32 gradient with none measured as the 16-bit one times the ratio of their model times.
double predict_kernel_time_ns(const std::vector<MeasuredKernelShape>& measured, const Op& op,
                              const std::function<double(const Op&)>& model_ns);

}  // namespace twin
