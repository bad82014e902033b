// The optimizer step under training.optimizer_precision: its bytes per parameter, its shape key (written and
// read back), and its price from fp32 measurements scaled by the bytes it moves.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

Op optimizer_step(std::int64_t elements, OptimizerPrecision precision = {}, int main_gradient_bytes = 2) {
  Op op;
  op.kind = OpKind::optimizer_step;
  op.elements = elements;
  op.optimizer_precision = precision;
  op.main_gradient_bytes = static_cast<std::int8_t>(main_gradient_bytes);
  return op;
}

constexpr OptimizerPrecision kBf16Moments{StateDtype::fp32, StateDtype::bf16, StateDtype::bf16};
constexpr OptimizerPrecision kNoMaster{StateDtype::bf16, StateDtype::bf16, StateDtype::bf16};

TEST(OptimizerPricing, BytesPerParameterFollowTheStorageAndTheGradient) {
  EXPECT_EQ(optimizer_bytes_per_parameter({}, 2), 30);          // fp32 master, m, v read and written + 2 + 2 + 2
  EXPECT_EQ(optimizer_bytes_per_parameter({}, 4), 34);          // an fp32 gradient read twice (AdamW, the norm)
  EXPECT_EQ(optimizer_bytes_per_parameter(kBf16Moments, 2), 22);  // m, v: 4 bytes each instead of 8
  EXPECT_EQ(optimizer_bytes_per_parameter(kNoMaster, 2), 16);     // the bf16 parameter read instead of the master
  EXPECT_EQ(optimizer_bytes_per_parameter({StateDtype::fp16, StateDtype::fp8, StateDtype::fp8}, 2), 4 + 2 + 2 + 6);
  EXPECT_EQ(memory_bound_bytes(optimizer_step(1000, kBf16Moments)), 22000);
  EXPECT_EQ(memory_bound_bytes(optimizer_step(1000, kBf16Moments, 4)), 26000);
}

TEST(OptimizerPricing, KeysNameANarrowerStorageAndAnFp32GradientAndReadBack) {
  EXPECT_EQ(kernel_shape_key(optimizer_step(1 << 20)), "optimizer_step:elements=1048576");
  const std::string key = kernel_shape_key(optimizer_step(1 << 20, kNoMaster));
  EXPECT_EQ(key, "optimizer_step:elements=1048576,main_params=bf16,exp_avg=bf16,exp_avg_sq=bf16");
  const auto op = op_from_kernel_key(key);
  ASSERT_TRUE(op.has_value());
  EXPECT_EQ(op->optimizer_precision, kNoMaster);
  EXPECT_EQ(op->main_gradient_bytes, 2);
  EXPECT_FALSE(op_from_kernel_key("optimizer_step:elements=1048576,exp_avg=fp7").has_value());
  // An fp32 main gradient is another kernel: named in the key, read back; a 16-bit one is the unnamed default.
  EXPECT_EQ(kernel_shape_key(optimizer_step(1 << 20, {}, 4)), "optimizer_step:elements=1048576,grad=fp32");
  const std::string both = kernel_shape_key(optimizer_step(1 << 20, kBf16Moments, 4));
  EXPECT_EQ(both, "optimizer_step:elements=1048576,main_params=fp32,exp_avg=bf16,exp_avg_sq=bf16,grad=fp32");
  const auto fp32 = op_from_kernel_key(both);
  ASSERT_TRUE(fp32.has_value());
  EXPECT_EQ(fp32->main_gradient_bytes, 4);
  EXPECT_EQ(fp32->optimizer_precision, kBf16Moments);
  EXPECT_FALSE(op_from_kernel_key("optimizer_step:elements=1048576,grad=bf16").has_value());  // not as written
  EXPECT_FALSE(op_from_kernel_key("optimizer_step:elements=1048576,grad=fp8").has_value());
}

// The built-in profile's H100 with only the optimizer steps a test measures: each price is compute_time_ns's.
struct MeasuredSteps {
  Profile profile = builtin_profile();
  const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  GpuKernelProfile& kernels = const_cast<GpuKernelProfile&>(profile.kernels_for(gpu));
  MeasuredSteps() { kernels.measured.clear(); }
  void measure(const Op& step, double median_ns) {
    kernels.measured[kernel_shape_key(step)] = {median_ns, 0.98 * median_ns, 1.02 * median_ns, 20};
    index_measured_shapes(kernels);
  }
  double price_ns(const Op& step) const { return double(compute_time_ns(profile, gpu, step)); }
};

TEST(OptimizerPricing, AnotherStateOrGradientIsPricedFromTheMeasurementByItsBytes) {
  MeasuredSteps steps;
  const Op measured = optimizer_step(std::int64_t{1} << 27);
  steps.measure(measured, 5.0e6);  // one measurement (fp32 state, bf16 gradient): the others are priced from it alone
  const double measured_ns = steps.price_ns(measured);
  const double bf16_ns = steps.price_ns(optimizer_step(std::int64_t{1} << 27, kBf16Moments));
  const double bare_ns = steps.price_ns(optimizer_step(std::int64_t{1} << 27, kNoMaster));
  const double fp32_grad_ns = steps.price_ns(optimizer_step(std::int64_t{1} << 27, {}, 4));
  // Bandwidth-bound: the time follows the bytes (22, 16 and 34 of the measured step's 30), within the bandwidth
  // curve's bend.
  EXPECT_NEAR(bf16_ns / measured_ns, 22.0 / 30, 0.05);
  EXPECT_NEAR(bare_ns / measured_ns, 16.0 / 30, 0.05);
  EXPECT_NEAR(fp32_grad_ns / measured_ns, 34.0 / 30, 0.05);
  // Measured with an fp32 gradient too, that step is priced by its own measurement (both times carry the built-in
  // profile's in-training factor: their ratio is the measurements').
  steps.measure(optimizer_step(std::int64_t{1} << 27, {}, 4), 6.2e6);
  EXPECT_NEAR(steps.price_ns(optimizer_step(std::int64_t{1} << 27, {}, 4)) / steps.price_ns(measured), 6.2 / 5.0, 1e-3);
}

// An fp32 gradient's step is its own kernel variant: where both are measured, a 16-bit step is priced from 16-bit
// measurements alone (the fp32 ones ran at another efficiency: 1.10x the time for 1.13x the bytes on an H200).
TEST(OptimizerPricing, EachGradientDtypeInterpolatesAmongItsOwnMeasurements) {
  MeasuredSteps steps;
  steps.measure(optimizer_step(std::int64_t{1} << 27), 5.0e6);
  steps.measure(optimizer_step(std::int64_t{1} << 29), 21.0e6);
  const Op bf16 = optimizer_step(std::int64_t{3} << 27), fp32 = optimizer_step(std::int64_t{3} << 27, {}, 4);
  const double bf16_alone_ns = steps.price_ns(bf16);
  const double fp32_from_bf16_ns = steps.price_ns(fp32);
  steps.measure(optimizer_step(std::int64_t{1} << 27, {}, 4), 4.0e6);
  steps.measure(optimizer_step(std::int64_t{1} << 29, {}, 4), 16.0e6);
  EXPECT_DOUBLE_EQ(steps.price_ns(bf16), bf16_alone_ns);
  // The fp32 step now follows its own measurements (0.80x and 0.76x the 16-bit ones' at the two sizes), no longer
  // the 16-bit ones by bytes.
  const double own = steps.price_ns(fp32) / bf16_alone_ns;
  EXPECT_GT(own, 0.75);
  EXPECT_LT(own, 0.81);
  EXPECT_NEAR(fp32_from_bf16_ns / bf16_alone_ns, 34.0 / 30, 0.05);
}

}  // namespace
}  // namespace twin
