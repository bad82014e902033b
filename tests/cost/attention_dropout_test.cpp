// Attention dropout's price (cost/attention_dropout.hpp): a fused attention op that drops its probabilities has a
// kernel key and variant of its own; unmeasured, it is priced as the same attention without dropout plus the draws
// (drawn elements x SM cycles per element over the SMs at the profile's attention clock); measured (a folded run),
// as measured; an unfused op keeps its dropout kernel's passes and draws nothing here.
#include <gtest/gtest.h>

#include "cost/attention_dropout.hpp"
#include "cost/profile.hpp"
#include "cost/shape_space.hpp"
#include "tests/cost/curve_kernels.hpp"

namespace twin {
namespace {

const GpuSpec& dropout_test_h200() {
  static const GpuSpec gpu = *gpu_preset("H200-141GB");
  return gpu;
}

GpuKernelProfile dropout_test_curves() { return testing::curve_kernels("H200-141GB"); }

Op dropout_test_attention(OpKind kind, float dropout) {
  Op op;
  op.kind = kind;
  op.attention = {1, 32, 8, 4096, 4096, 128, true, true};
  op.dropout = dropout;
  return op;
}

TEST(AttentionDropoutPrice, FusedDropoutIsAKernelOfItsOwn) {
  const Op plain = dropout_test_attention(OpKind::attention_forward, 0), dropped = dropout_test_attention(OpKind::attention_forward, 0.1f);
  EXPECT_EQ(kernel_shape_key(dropped), kernel_shape_key(plain) + ",dropout=1");
  EXPECT_TRUE(fused_attention_dropout(dropped));
  EXPECT_FALSE(fused_attention_dropout(plain));
  // Read back, the key is the same kernel.
  const auto parsed = op_from_kernel_key(kernel_shape_key(dropped));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(fused_attention_dropout(*parsed));
  EXPECT_EQ(kernel_shape_key(*parsed), kernel_shape_key(dropped));
}

TEST(AttentionDropoutPrice, UnmeasuredIsThePlainKernelPlusTheDraws) {
  const GpuKernelProfile k = dropout_test_curves();
  const double drawn =
      32.0 * 4096 * 4096 * attention_score_fraction(dropout_test_attention(OpKind::attention_forward, 0).attention);
  for (const OpKind kind : {OpKind::attention_forward, OpKind::attention_backward}) {
    const double cycles = kind == OpKind::attention_forward ? kAttentionDropoutForwardSmCyclesPerElement
                                                            : kAttentionDropoutBackwardSmCyclesPerElement;
    const double draws_ns =
        drawn * cycles / (dropout_test_h200().sm_count * kAttentionDropoutMeasuredClockMHz * 1e-3);
    EXPECT_NEAR(fused_attention_dropout_ns(dropout_test_attention(kind, 0.1f), dropout_test_h200(), k), draws_ns, 1e-6 * draws_ns);
    EXPECT_NEAR(benchmark_kernel_time_ns(k, dropout_test_h200(), dropout_test_attention(kind, 0.1f)),
                benchmark_kernel_time_ns(k, dropout_test_h200(), dropout_test_attention(kind, 0)) + draws_ns, 1e-6 * draws_ns);
  }
  // The H200 measurement it comes from: 1.039 ps a drawn element forward at 1,980 MHz on 132 SMs.
  EXPECT_NEAR(fused_attention_dropout_ns(dropout_test_attention(OpKind::attention_forward, 0.1f), dropout_test_h200(), k) / drawn * 1e3,
              1.039 * 132 / dropout_test_h200().sm_count, 0.001);
}

TEST(AttentionDropoutPrice, DrawsStandAtTheProfilesAttentionClock) {
  GpuKernelProfile k = dropout_test_curves();
  const double at_measured = fused_attention_dropout_ns(dropout_test_attention(OpKind::attention_forward, 0.1f), dropout_test_h200(), k);
  k.attention_at_reference_clock = true;
  k.reference_sm_clock_MHz = 1650;
  EXPECT_NEAR(fused_attention_dropout_ns(dropout_test_attention(OpKind::attention_forward, 0.1f), dropout_test_h200(), k),
              at_measured * kAttentionDropoutMeasuredClockMHz / 1650, 1e-6 * at_measured);
}

TEST(AttentionDropoutPrice, AMeasuredDropoutKernelIsPricedAsMeasured) {
  GpuKernelProfile k = dropout_test_curves();
  const Op dropped = dropout_test_attention(OpKind::attention_forward, 0.1f);
  Measurement folded;
  folded.median_ns = folded.p10_ns = folded.p90_ns = 777000;
  folded.samples = 5;
  k.measured[kernel_shape_key(dropped)] = folded;
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, dropout_test_h200(), dropped), 777000);
}

TEST(AttentionDropoutPrice, UnfusedDropoutKeepsItsKernelAndDrawsNothingHere) {
  Op unfused = dropout_test_attention(OpKind::attention_forward, 0.1f);
  unfused.attention.flash = false;
  unfused.attention.dropout = true;
  EXPECT_TRUE(drops_attention_probabilities(unfused));
  EXPECT_FALSE(fused_attention_dropout(unfused));
  EXPECT_EQ(fused_attention_dropout_ns(unfused, dropout_test_h200(), dropout_test_curves()), 0);
}

}  // namespace
}  // namespace twin
