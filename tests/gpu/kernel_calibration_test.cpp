// The kernel calibration on a small op list: every op measured under CUPTI with a sane spread, the
// models fitted, and an unrunnable shape skipped with its reason. Prints the timings it saw.
#include <gtest/gtest.h>

#include <set>

#include "calibrate/gpu/kernel_calibration.hpp"
#include "core/cluster.hpp"
#include "core/op_kinds.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::gpu {
namespace {

TEST(KernelCalibration, MeasuresEveryKindAndFitsTheModels) {
  REQUIRE_GPU();
  KernelOps ops = default_kernel_ops(/*quick=*/true);
  Op odd;
  odd.kind = OpKind::rope_forward;
  odd.rows = 16;
  odd.cols = 100;  // no 64- or 128-wide heads fit: skipped
  ops.ops.push_back(odd);
  const GpuSpec spec = *gpu_preset("H200-141GB");
  GpuKernelProfile fallback;
  const KernelCalibration result =
      calibrate_kernels(ops, spec, fallback, true, [](const std::string& line) { std::printf("[calibrate] %s\n", line.c_str()); });
  EXPECT_EQ(result.measured.size() + 1, ops.ops.size());
  ASSERT_EQ(result.skipped.size(), 1u);
  for (const auto& [key, m] : result.measured) {
    EXPECT_GT(m.median_ns, 0) << key;
    EXPECT_LE(m.p10_ns, m.median_ns) << key;
    EXPECT_LE(m.median_ns, m.p90_ns) << key;
  }
  EXPECT_TRUE(result.memory_bound_fitted && result.attention_forward_fitted && result.attention_backward_fitted);
  std::printf("[calibrate] memory_bound peak %.3f half %.3g B; attention fwd peak %.4f half %.3g; bwd peak %.4f half %.3g\n",
              result.memory_bound.peak, result.memory_bound.half_work, result.attention_forward.peak,
              result.attention_forward.half_work, result.attention_backward.peak, result.attention_backward.half_work);
  EXPECT_GT(result.memory_bound.peak, 0.05);
  EXPECT_LT(result.memory_bound.peak, 1.2);
}

// Needs no GPU: the op list is plain data. Every kind the op-kind table says the kernel calibration measures
// is in its default list, so a new kernel kind cannot ship unmeasured.
TEST(KernelCalibration, DefaultOpsCoverEveryKindTheTableSaysIsBenched) {
  std::set<OpKind> listed;
  for (const Op& op : default_kernel_ops(/*quick=*/false).ops) listed.insert(op.kind);
  for (OpKind kind : all_op_kinds()) {
    const bool benched = op_kind_traits(kind).measured_by == CalibrationMethod::kernel_bench;
    EXPECT_EQ(listed.count(kind) == 1, benched) << to_string(kind);
  }
}

}  // namespace
}  // namespace twin::gpu
