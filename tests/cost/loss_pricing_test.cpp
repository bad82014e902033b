// A soft-capped loss (Gemma-2's final logits) is another kernel than the plain loss: priced by capped measurements
// alone, and as the plain loss where a profile measured no capped one.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

Op loss(OpKind kind, bool capped, std::int64_t rows = 16384, std::int64_t cols = 64128) {
  Op op;
  op.kind = kind;
  op.rows = rows;
  op.cols = cols;
  op.softcapped_logits = capped;
  return op;
}

TEST(LossPricing, CappedAndPlainLossesAreOtherKernels) {
  EXPECT_FALSE(squared_octave_distance(loss(OpKind::loss_forward, true), loss(OpKind::loss_forward, false)));
  EXPECT_TRUE(squared_octave_distance(loss(OpKind::loss_forward, true), loss(OpKind::loss_forward, true, 4096)));
}

TEST(LossPricing, ACappedLossFollowsCappedMeasurementsElseThePlainLoss) {
  Profile profile = builtin_profile();
  const GpuSpec gpu = *gpu_preset("H200-141GB");
  auto& kernels = const_cast<GpuKernelProfile&>(profile.kernels_for(gpu));
  kernels.measured.clear();
  // Measured plain losses at 1.0 ms per 2^30 logits, capped ones 2.5x that, on two sizes each.
  for (std::int64_t rows : {4096, 16384}) {
    const double plain_ns = 1.0e6 * double(rows) * 64128 / double(1 << 30);
    kernels.measured[kernel_shape_key(loss(OpKind::loss_forward, false, rows))] = {plain_ns, plain_ns, plain_ns, 15};
  }
  index_measured_shapes(kernels);
  const Op far_capped = loss(OpKind::loss_forward, true, 32768, 256000);  // Gemma-2: 4 x 8192 rows, 256,000 logits
  const Op far_plain = loss(OpKind::loss_forward, false, 32768, 256000);
  const double plain_ns = double(compute_time_ns(profile, gpu, far_plain));
  EXPECT_EQ(double(compute_time_ns(profile, gpu, far_capped)), plain_ns);  // no capped measurement: the plain price
  for (std::int64_t rows : {4096, 16384}) {
    const double capped_ns = 2.5e6 * double(rows) * 64128 / double(1 << 30);
    kernels.measured[kernel_shape_key(loss(OpKind::loss_forward, true, rows))] = {capped_ns, capped_ns, capped_ns, 15};
  }
  index_measured_shapes(kernels);
  // Priced from the capped shapes alone: 2.5x the plain price, where plain neighbours would pull it towards 1x.
  EXPECT_NEAR(double(compute_time_ns(profile, gpu, far_capped)) / plain_ns, 2.5, 0.05);
  EXPECT_EQ(double(compute_time_ns(profile, gpu, far_plain)), plain_ns);
}

}  // namespace
}  // namespace twin
