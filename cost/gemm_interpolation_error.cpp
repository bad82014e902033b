// Leave-one-out takes one entry out of a single copy of the kernel profile at a time and puts it back, so that
// a profile of ~4,300 GEMMs is priced 4,300 times without 4,300 copies of its map.
#include "cost/gemm_interpolation_error.hpp"

#include <stdexcept>

#include "cost/gemm_predictor.hpp"

namespace twin {
namespace {

Op gemm_op(const GemmShape& shape) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = shape;
  return op;
}

}  // namespace

std::vector<GemmPredictionError> leave_one_gemm_out(const GpuKernelProfile& kernels, const GpuSpec& gpu) {
  GpuKernelProfile rest = kernels;
  std::vector<GemmPredictionError> errors;
  for (std::size_t i = 0; i < kernels.measured_gemms.size(); ++i) {
    const MeasuredGemm& held = kernels.measured_gemms[i];
    const Op op = gemm_op(held.shape);
    auto entry = rest.measured.extract(kernel_shape_key(op));
    if (entry.empty()) throw std::logic_error("leave_one_gemm_out: no entry for " + kernel_shape_key(op));
    rest.measured_gemms.erase(rest.measured_gemms.begin() + static_cast<std::ptrdiff_t>(i));
    errors.push_back({held.shape, held.time_ns, benchmark_kernel_time_ns(rest, gpu, op)});
    rest.measured_gemms.insert(rest.measured_gemms.begin() + static_cast<std::ptrdiff_t>(i), held);
    rest.measured.insert(std::move(entry));
  }
  return errors;
}

std::vector<GemmPredictionError> held_out_gemm_errors(const GpuKernelProfile& kernels, const GpuSpec& gpu,
                                                      const std::vector<MeasuredGemm>& held_out) {
  std::vector<GemmPredictionError> errors;
  for (const MeasuredGemm& g : held_out)
    errors.push_back({g.shape, g.time_ns, benchmark_kernel_time_ns(kernels, gpu, gemm_op(g.shape))});
  return errors;
}

double gemm_waves(const GemmShape& shape, int sm_count) {
  const auto [rows, columns] = kGemmTiles.front();
  const double tiles = double((shape.m + rows - 1) / rows) * double((shape.n + columns - 1) / columns) * shape.count;
  return tiles / sm_count;
}

}  // namespace twin
