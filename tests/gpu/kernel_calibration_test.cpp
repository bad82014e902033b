// The kernel calibration on a small op list: every op measured under CUPTI with a sane spread, the
// models fitted, and an unrunnable shape skipped with its reason. Prints the timings it saw.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "calibrate/attention_check_shapes.hpp"
#include "calibrate/gpu/kernel_calibration.hpp"
#include "core/cluster.hpp"
#include "core/op_kinds.hpp"
#include "cost/sm_clock.hpp"
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

// Attention's timings carry the SM clock probed beside them; with a profile whose attention is at its reference
// clock they are scaled to it by attention's clock law (time x (clock / reference)^e, cost/sm_clock.hpp), and memory-bound
// kinds carry no clock.
TEST(KernelCalibration, AttentionCarriesItsClockAndScalesToTheReference) {
  REQUIRE_GPU();
  KernelOps ops;
  Op attention;
  attention.kind = OpKind::attention_forward;
  attention.attention = AttentionShape{1, 32, 8, 4096, 4096, 128, true, true};
  Op norm;
  norm.kind = OpKind::norm_forward;
  norm.rows = 4096;
  norm.cols = 4096;
  ops.ops = {attention, norm};
  const GpuSpec spec = *gpu_preset("H200-141GB");
  GpuKernelProfile as_timed;
  const KernelCalibration timed = calibrate_kernels(ops, spec, as_timed, true, {});
  ASSERT_EQ(timed.measured.size(), 2u);
  const Measurement& raw = timed.measured[0].second;
  EXPECT_GT(raw.sm_clock_MHz, 500) << timed.measured[0].first;
  EXPECT_LT(raw.sm_clock_MHz, 2500) << timed.measured[0].first;
  EXPECT_EQ(timed.measured[1].second.sm_clock_MHz, 0) << timed.measured[1].first;

  GpuKernelProfile at_reference;
  at_reference.reference_sm_clock_MHz = 1000;  // far from any clock an H200 runs at: the scaling shows
  at_reference.attention_at_reference_clock = true;
  const KernelCalibration scaled = calibrate_kernels(ops, spec, at_reference, true, {});
  const Measurement& m = scaled.measured[0].second;
  ASSERT_GT(m.sm_clock_MHz, 0);
  // Each timing's clock is its own: compare the law's invariant time x clock^e, which a clock swing between the two
  // calls leaves alone (within the run-to-run spread of one shape, 10%).
  const double e = kAttentionForwardClockExponent;
  const double raw_invariant = raw.median_ns * std::pow(raw.sm_clock_MHz, e), scaled_invariant = m.median_ns * std::pow(1000.0, e);
  EXPECT_NEAR(scaled_invariant / raw_invariant, 1.0, 0.10);
  std::printf("[calibrate] attention %.1f us at %.0f MHz as timed; %.1f us at 1000 MHz (ran at %.0f MHz)\n",
              raw.median_ns * 1e-3, raw.sm_clock_MHz, m.median_ns * 1e-3, m.sm_clock_MHz);
}

// The attention head dims the executor's cuDNN attention runs are benched (Gemma's 256 with GQA, Phi-3's 96, MLA's
// 192 / 128), and timed: each bench runs and its kernels take time; a head dim cuDNN cannot run is refused by name.
TEST(KernelCalibration, BenchesEveryHeadDimTheExecutorRuns) {
  REQUIRE_GPU();
  KernelOps ops;
  for (OpKind kind : {OpKind::attention_forward, OpKind::attention_backward}) {
    for (auto [heads, kv_heads, head_dim, v_head_dim] :
         {std::array<int, 4>{16, 8, 256, 0}, {32, 32, 96, 0}, {16, 16, 192, 128}}) {
      Op op;
      op.kind = kind;
      op.attention = AttentionShape{1, heads, kv_heads, 2048, 2048, head_dim, true, true};
      op.attention.v_head_dim = static_cast<std::int16_t>(v_head_dim);
      ops.ops.push_back(op);
    }
  }
  Op odd = ops.ops.front();
  odd.attention.head_dim = 100;  // not a multiple of 8
  ops.ops.push_back(odd);
  GpuKernelProfile fallback;
  const KernelCalibration result = calibrate_kernels(ops, *gpu_preset("H200-141GB"), fallback, true, nullptr);
  ASSERT_EQ(result.measured.size(), 6u);
  for (const auto& [key, m] : result.measured) {
    EXPECT_GT(m.median_ns, 1000) << key;  // at least a microsecond: the kernels ran
    std::printf("[calibrate] %s: %.1f us\n", key.c_str(), m.median_ns * 1e-3);
  }
  ASSERT_EQ(result.skipped.size(), 1u);
  EXPECT_NE(result.skipped.front().find("multiples of 8 up to 256"), std::string::npos) << result.skipped.front();
}

// Unfused attention (Megatron-LM's kernels, gpu/unfused_attention.hpp) is benched as the executor runs it since
// 2026-12-03: forward and backward, with and without its dropout kernel, each slower than the fused kernel of its
// shape (it moves the scores through memory); a window, which it does not run, is refused by name.
TEST(KernelCalibration, BenchesUnfusedAttention) {
  REQUIRE_GPU();
  KernelOps ops;
  for (OpKind kind : {OpKind::attention_forward, OpKind::attention_backward})
    for (bool flash : {true, false})
      for (bool dropout : {false, true}) {
        if (flash && dropout) continue;  // fused attention is timed without dropout
        Op op;
        op.kind = kind;
        op.attention = AttentionShape{2, 16, 16, 2048, 2048, 96, true, flash};
        op.attention.dropout = dropout;
        op.dropout = dropout ? 0.1f : 0.f;
        ops.ops.push_back(op);
      }
  Op windowed = ops.ops[1];
  windowed.attention.window = 512;
  ops.ops.push_back(windowed);
  GpuKernelProfile fallback;
  const KernelCalibration result = calibrate_kernels(ops, *gpu_preset("H200-141GB"), fallback, true, nullptr);
  ASSERT_EQ(result.measured.size(), 6u);
  ASSERT_EQ(result.skipped.size(), 1u);
  EXPECT_NE(result.skipped.front().find("without windows"), std::string::npos) << result.skipped.front();
  // In the order listed: per pass, fused, unfused, unfused with dropout.
  for (std::size_t pass = 0; pass < 2; ++pass) {
    const double fused = result.measured[3 * pass].second.median_ns;
    const double unfused = result.measured[3 * pass + 1].second.median_ns;
    const double dropped = result.measured[3 * pass + 2].second.median_ns;
    std::printf("[calibrate] attention %s b2 h16 s2048 d96: fused %.1f us, unfused %.1f us, with dropout %.1f us\n",
                pass == 0 ? "forward" : "backward", fused * 1e-3, unfused * 1e-3, dropped * 1e-3);
    EXPECT_GT(unfused, fused) << result.measured[3 * pass + 1].first;
    EXPECT_GT(dropped, unfused) << result.measured[3 * pass + 2].first;
  }
}

// The optimizer step's bench reads the main gradient in the op's dtype, as twin execute's step does: AdamW and the
// norm's pass are bound by HBM, so an fp32 gradient's step takes about its bytes' share longer (34 / 30 a parameter,
// cost/compute_kinds.cpp); a bench that ignored the dtype would time both alike. Held at the grid's 134 M
// parameters (1.105 and 1.104 on one H200, 2026-12-03); the 16.8 M step (~0.15 ms) is printed only: under the quick
// protocol it read 1.106 on one lease and 1.000 on the next.
TEST(KernelCalibration, OptimizerStepOnAnFp32GradientMovesItsBytes) {
  REQUIRE_GPU();
  // The quick grid's optimizer steps with fp32 state: 16.8 M and 134 M parameters, each on both gradients.
  KernelOps ops = default_kernel_ops(/*quick=*/true);
  std::erase_if(ops.ops, [](const Op& op) {
    return op.kind != OpKind::optimizer_step || !op.optimizer_precision.is_default();
  });
  GpuKernelProfile fallback;
  const KernelCalibration result =
      calibrate_kernels(ops, *gpu_preset("H200-141GB"), fallback, true, [](const std::string&) {});
  ASSERT_EQ(result.measured.size(), 4u);
  const std::map<std::string, Measurement> measured(result.measured.begin(), result.measured.end());
  for (const std::int64_t elements : {std::int64_t{1} << 24, std::int64_t{1} << 27}) {
    const std::string bf16 = "optimizer_step:elements=" + std::to_string(elements);
    const double ratio = measured.at(bf16 + ",grad=fp32").median_ns / measured.at(bf16).median_ns;
    std::printf("[calibrate] optimizer step of %lld parameters: fp32 / bf16 gradient %.3f (bytes 34 / 30 = 1.133)\n",
                static_cast<long long>(elements), ratio);
    if (elements == std::int64_t{1} << 27) EXPECT_NEAR(ratio, 34.0 / 30, 0.08) << elements << " parameters";
  }
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

namespace twin::gpu {
namespace {

// Needs no GPU: the attention `twin calibrate --check` times is apart from the grid calibration measures, and every
// shape of it is one the executor's attention runs (head dims 64 or 128, key-value groups dividing the heads).
TEST(KernelCalibration, CheckAttentionIsOffTheGridAndRunnable) {
  std::set<std::string> grid;
  for (const Op& op : default_kernel_ops(/*quick=*/false).ops) grid.insert(kernel_shape_key(op));
  const std::vector<ModelAttention> shapes = off_grid_model_attention();
  ASSERT_EQ(shapes.size(), 12u);
  for (const ModelAttention& a : shapes) {
    EXPECT_FALSE(grid.count(kernel_shape_key(a.op))) << a.origin;
    const AttentionShape& s = a.op.attention;
    EXPECT_TRUE(s.head_dim == 64 || s.head_dim == 128) << a.origin;
    EXPECT_EQ(s.heads % s.kv_heads, 0) << a.origin;
    EXPECT_TRUE(s.flash && s.causal && s.seq_q == s.seq_kv) << a.origin;
  }
}

}  // namespace
}  // namespace twin::gpu
