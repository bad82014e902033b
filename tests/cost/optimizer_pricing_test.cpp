// The optimizer step under training.optimizer_precision: its bytes per parameter, its shape key (written and
// read back), and its price from fp32 measurements scaled by the bytes it moves.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

Op optimizer_step(std::int64_t elements, OptimizerPrecision precision = {}) {
  Op op;
  op.kind = OpKind::optimizer_step;
  op.elements = elements;
  op.optimizer_precision = precision;
  return op;
}

constexpr OptimizerPrecision kBf16Moments{StateDtype::fp32, StateDtype::bf16, StateDtype::bf16};
constexpr OptimizerPrecision kNoMaster{StateDtype::bf16, StateDtype::bf16, StateDtype::bf16};

TEST(OptimizerPricing, BytesPerParameterFollowTheStorage) {
  EXPECT_EQ(optimizer_bytes_per_parameter({}), 32);          // fp32 master, m, v read and written + 8
  EXPECT_EQ(optimizer_bytes_per_parameter(kBf16Moments), 24);  // m, v: 4 bytes each instead of 8
  EXPECT_EQ(optimizer_bytes_per_parameter(kNoMaster), 18);     // the bf16 parameter read instead of the master
  EXPECT_EQ(optimizer_bytes_per_parameter({StateDtype::fp16, StateDtype::fp8, StateDtype::fp8}), 4 + 2 + 2 + 8);
  EXPECT_EQ(memory_bound_bytes(optimizer_step(1000, kBf16Moments)), 24000);
}

TEST(OptimizerPricing, KeysNameANarrowerStorageAndReadBack) {
  EXPECT_EQ(kernel_shape_key(optimizer_step(1 << 20)), "optimizer_step:elements=1048576");
  const std::string key = kernel_shape_key(optimizer_step(1 << 20, kNoMaster));
  EXPECT_EQ(key, "optimizer_step:elements=1048576,main_params=bf16,exp_avg=bf16,exp_avg_sq=bf16");
  const auto op = op_from_kernel_key(key);
  ASSERT_TRUE(op.has_value());
  EXPECT_EQ(op->optimizer_precision, kNoMaster);
  EXPECT_FALSE(op_from_kernel_key("optimizer_step:elements=1048576,exp_avg=fp7").has_value());
}

TEST(OptimizerPricing, ANarrowerStateIsPricedFromTheFp32MeasurementByItsBytes) {
  Profile profile = builtin_profile();
  const GpuSpec& gpu = *gpu_preset("H100-SXM-80GB");
  auto& kernels = const_cast<GpuKernelProfile&>(profile.kernels_for(gpu));
  const Op fp32 = optimizer_step(std::int64_t{1} << 27);
  kernels.measured.clear();  // one fp32 measurement: the narrower steps are priced from it alone
  kernels.measured[kernel_shape_key(fp32)] = {5.0e6, 4.9e6, 5.1e6, 20};
  index_measured_shapes(kernels);
  const double fp32_ns = double(compute_time_ns(profile, gpu, fp32));
  const double bf16_ns = double(compute_time_ns(profile, gpu, optimizer_step(std::int64_t{1} << 27, kBf16Moments)));
  const double bare_ns = double(compute_time_ns(profile, gpu, optimizer_step(std::int64_t{1} << 27, kNoMaster)));
  // Bandwidth-bound: the time follows the bytes (24 / 32 and 18 / 32 of the measured step), within the
  // bandwidth curve's bend.
  EXPECT_NEAR(bf16_ns / fp32_ns, 24.0 / 32, 0.05);
  EXPECT_NEAR(bare_ns / fp32_ns, 18.0 / 32, 0.05);
}

}  // namespace
}  // namespace twin
