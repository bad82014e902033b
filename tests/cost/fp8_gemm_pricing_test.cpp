// FP8 GEMMs (docs/PROFILES.md "FP8 GEMMs"): a measured FP8 shape wins; FP8 shapes interpolate among FP8
// measurements only; without any, the BF16 price of the shape at the FP8 peak (the stated assumption); the floor
// is the FP8 peak; keys carry the operands; fp8_cast is priced by its bytes, among the casts of its own recipe.
#include <gtest/gtest.h>

#include "cost/gemm_predictor.hpp"
#include "cost/profile.hpp"
#include "cost/shape_space.hpp"
#include "tests/cost/curve_kernels.hpp"

namespace twin {
namespace {

const GpuSpec& h100_spec() {
  static const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  return gpu;
}

GpuKernelProfile curves() { return testing::curve_kernels("H100-SXM-80GB"); }

Op fp8_gemm_op(std::int64_t m, std::int64_t n, std::int64_t k, GemmInputs inputs = GemmInputs::bf16) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = {m, n, k};
  op.gemm.inputs = inputs;
  op.gemm.e5m2 = inputs != GemmInputs::bf16;
  op.flops = 2.0 * double(m) * double(n) * double(k);
  return op;
}

TEST(Fp8GemmPricing, Bf16PriceAtTheFp8PeakWhereNothingIsMeasured) {
  GpuKernelProfile k = curves();
  k.measured[kernel_shape_key(fp8_gemm_op(8192, 8192, 8192))] = {1.0e6, 1.0e6, 1.0e6, 5};  // a measured BF16 shape
  index_measured_shapes(k);
  const double bf16 = benchmark_kernel_time_ns(k, h100_spec(), fp8_gemm_op(8192, 8192, 8192));
  const double fp8 =
      benchmark_kernel_time_ns(k, h100_spec(), fp8_gemm_op(8192, 8192, 8192, GemmInputs::fp8_per_tensor));
  EXPECT_DOUBLE_EQ(bf16, 1.0e6);
  EXPECT_DOUBLE_EQ(fp8, 1.0e6 * 989.4 / 1978.9);
  EXPECT_TRUE(k.measured_fp8_gemms.empty());
}

TEST(Fp8GemmPricing, MeasuredFp8ShapesWinAndAreNoBf16Neighbours) {
  GpuKernelProfile k = curves();
  const Op fp8 = fp8_gemm_op(4096, 4096, 4096, GemmInputs::mxfp8);
  k.measured[kernel_shape_key(fp8)] = {1.0e5, 1.0e5, 1.0e5, 5};
  k.measured[kernel_shape_key(fp8_gemm_op(8192, 8192, 8192))] = {1.0e6, 1.0e6, 1.0e6, 5};
  index_measured_shapes(k);
  ASSERT_EQ(k.measured_fp8_gemms.size(), 1u);
  ASSERT_EQ(k.measured_gemms.size(), 1u);
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, h100_spec(), fp8), 1.0e5);
  // Another FP8 shape interpolates among the FP8 measurement, not the BF16 one.
  const double near = benchmark_kernel_time_ns(k, h100_spec(), fp8_gemm_op(4096, 4096, 8192, GemmInputs::mxfp8));
  EXPECT_NEAR(near, 2.0e5, 0.2e5);
}

TEST(Fp8GemmPricing, FloorIsTheFp8Peak) {
  Profile p;
  p.gpus = {curves()};
  p.gpus.front().gemm = {50.0, 0};  // an absurd efficiency: the floor must hold
  const Op fp8 = fp8_gemm_op(8192, 8192, 8192, GemmInputs::fp8_per_tensor);
  EXPECT_GE(compute_time_ns(p, h100_spec(), fp8), static_cast<TimeNs>(fp8.flops / (1978.9 * 1e3)));
  EXPECT_LT(compute_time_ns(p, h100_spec(), fp8), static_cast<TimeNs>(fp8.flops / (989.4 * 1e3)));
}

TEST(Fp8GemmPricing, KeysCarryTheOperandsAndReadBack) {
  const Op bf16 = fp8_gemm_op(1024, 2048, 4096);
  EXPECT_EQ(kernel_shape_key(bf16), "gemm:m=1024,n=2048,k=4096,count=1,ta=0,tb=0");
  const Op fp8 = fp8_gemm_op(1024, 2048, 4096, GemmInputs::fp8_blockwise);
  EXPECT_EQ(kernel_shape_key(fp8), "gemm:m=1024,n=2048,k=4096,count=1,ta=0,tb=0,inputs=fp8_blockwise,e5m2=1");
  const auto back = op_from_kernel_key(kernel_shape_key(fp8));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->gemm.inputs, GemmInputs::fp8_blockwise);
  EXPECT_TRUE(back->gemm.e5m2);
  EXPECT_FALSE(op_from_kernel_key("gemm:m=1,n=1,k=1,count=1,ta=0,tb=0,inputs=fp4,e5m2=0"));
}

TEST(Fp8GemmPricing, CastIsPricedByItsBytes) {
  Op cast;
  cast.kind = OpKind::fp8_cast;
  cast.rows = 4096;
  cast.cols = 4096;
  cast.bytes = 4096 * 4096 * 4;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(cast), 4096.0 * 4096 * 4);
  EXPECT_EQ(kernel_shape_key(cast), "fp8_cast:bytes=67108864");
}

// The recipe names the cast's kernel (Op::fp8_recipe): it is in the key (tensorwise keys as before it was), reads
// back, and a measurement of one recipe never prices a cast of another, even one that moves the same bytes.
TEST(Fp8GemmPricing, CastKeysCarryTheRecipeAndPriceOnlyTheirOwn) {
  Op tensorwise;
  tensorwise.kind = OpKind::fp8_cast;
  tensorwise.bytes = 4096 * 4096 * 4;
  Op delayed = tensorwise;
  delayed.fp8_recipe = Fp8Recipe::delayed;
  EXPECT_EQ(kernel_shape_key(tensorwise), "fp8_cast:bytes=67108864");
  EXPECT_EQ(kernel_shape_key(delayed), "fp8_cast:bytes=67108864,recipe=delayed");
  for (Fp8Recipe recipe : {Fp8Recipe::tensorwise, Fp8Recipe::delayed, Fp8Recipe::blockwise}) {
    Op cast = tensorwise;
    cast.fp8_recipe = recipe;
    const auto back = op_from_kernel_key(kernel_shape_key(cast));
    ASSERT_TRUE(back) << kernel_shape_key(cast);
    EXPECT_EQ(back->fp8_recipe, recipe);
  }
  EXPECT_FALSE(op_from_kernel_key("fp8_cast:bytes=64,recipe=percentile"));

  GpuKernelProfile k = curves();
  const double curve_ns = benchmark_kernel_time_ns(k, h100_spec(), delayed);
  for (std::int64_t bytes : {tensorwise.bytes / 2, tensorwise.bytes, tensorwise.bytes * 2}) {
    Op measured = tensorwise;
    measured.bytes = bytes;
    k.measured[kernel_shape_key(measured)] = {1.0e6, 1.0e6, 1.0e6, 5};  // far from the curve's price
  }
  index_measured_shapes(k);
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, h100_spec(), tensorwise), 1.0e6);
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, h100_spec(), delayed), curve_ns);  // no delayed cast measured
}

}  // namespace
}  // namespace twin
