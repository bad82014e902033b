// The norm op names its kernel (issue 42 item 3): a LayerNorm op's shape key ends ",ln=1" and reads back as
// LayerNorm, RMSNorm keys are as before, and a measured shape of one norm never prices the other.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

Op norm(OpKind kind, Normalization normalization, std::int64_t rows = 8192, std::int64_t cols = 4096) {
  Op op;
  op.kind = kind;
  op.rows = rows;
  op.cols = cols;
  op.normalization = normalization;
  return op;
}

TEST(NormPricing, KeysNameLayerNormAndReadBack) {
  EXPECT_EQ(kernel_shape_key(norm(OpKind::norm_forward, Normalization::rmsnorm)), "norm_forward:rows=8192,cols=4096");
  Op residual = norm(OpKind::norm_backward, Normalization::layernorm);
  residual.fuses_residual = true;
  const std::string key = kernel_shape_key(residual);
  EXPECT_EQ(key, "norm_backward:rows=8192,cols=4096,residual=1,ln=1");
  const auto op = op_from_kernel_key(key);
  ASSERT_TRUE(op.has_value());
  EXPECT_EQ(op->normalization, Normalization::layernorm);
  EXPECT_TRUE(op->fuses_residual);
  EXPECT_EQ(op_from_kernel_key("norm_forward:rows=8192,cols=4096")->normalization, Normalization::rmsnorm);
}

TEST(NormPricing, AMeasuredShapeOfOneNormDoesNotPriceTheOther) {
  const Op rms = norm(OpKind::norm_forward, Normalization::rmsnorm);
  const Op ln = norm(OpKind::norm_forward, Normalization::layernorm);
  EXPECT_FALSE(squared_octave_distance(rms, ln).has_value());
  EXPECT_TRUE(squared_octave_distance(ln, norm(OpKind::norm_forward, Normalization::layernorm, 4096)).has_value());
  Profile profile = builtin_profile();
  const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  auto& kernels = const_cast<GpuKernelProfile&>(profile.kernels_for(gpu));
  kernels.measured.clear();
  index_measured_shapes(kernels);  // the shipped profile's measured norms gone from the index too: the curve prices
  const double ln_curve_ns = double(compute_time_ns(profile, gpu, ln));
  const double rms_curve_ns = double(compute_time_ns(profile, gpu, rms));
  kernels.measured[kernel_shape_key(rms)] = {1.0e6, 0.99e6, 1.01e6, 20};  // far from the curve on purpose
  index_measured_shapes(kernels);
  const double rms_ns = double(compute_time_ns(profile, gpu, rms));  // the measurement (at the profile's clock)
  EXPECT_GT(rms_ns, 5 * rms_curve_ns);
  EXPECT_EQ(double(compute_time_ns(profile, gpu, ln)), ln_curve_ns);  // the RMSNorm measurement is not LayerNorm's
  kernels.measured[kernel_shape_key(ln)] = {2.0e6, 1.99e6, 2.01e6, 20};
  index_measured_shapes(kernels);
  EXPECT_NEAR(double(compute_time_ns(profile, gpu, ln)) / rms_ns, 2.0, 0.01);  // each its own measurement
  EXPECT_EQ(double(compute_time_ns(profile, gpu, rms)), rms_ns);
}

}  // namespace
}  // namespace twin
