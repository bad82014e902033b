// Unfused attention priced as the kernels it launches (cost/unfused_attention.hpp): the batched GEMMs at their FLOPs
// plus their pass over the scores, softmax and dropout by their bytes; checked against a float64 reference written
// out kernel by kernel, and against the FLOPs the op vocabulary counts (core/attention_flops.hpp).
#include <gtest/gtest.h>

#include "core/attention_flops.hpp"
#include "cost/memory_bound_bytes.hpp"
#include "cost/profile.hpp"
#include "cost/unfused_attention.hpp"
#include "tests/cost/curve_kernels.hpp"

namespace twin {
namespace {

const GpuSpec& unfused_test_a100() {
  static const GpuSpec gpu = *gpu_preset("A100-SXM-80GB");
  return gpu;
}

// GPT-1.7B's attention in Narayanan et al. 2021 Table 1: 8 sequences of 2,048, 24 heads of 96, dropout 0.1.
Op unfused_test_attention(OpKind kind, bool dropout) {
  Op op;
  op.kind = kind;
  op.attention = {8, 24, 24, 2048, 2048, 96, true, false};
  op.attention.dropout = dropout;
  return op;
}

TEST(UnfusedAttention, KernelsFlopsAndPassesAsLaunched) {
  const double elements = 8.0 * 24 * 2048 * 2048, pass = 2 * elements;
  const auto forward = unfused_attention_kernels(unfused_test_attention(OpKind::attention_forward, true));
  ASSERT_EQ(forward.size(), 4u);  // Q K^T, softmax, dropout, P V
  EXPECT_DOUBLE_EQ(forward[0].flops, 2 * elements * 96);
  EXPECT_DOUBLE_EQ(forward[0].score_bytes, pass);
  EXPECT_DOUBLE_EQ(forward[1].flops, 0);
  EXPECT_DOUBLE_EQ(forward[1].score_bytes, 2 * pass);
  EXPECT_DOUBLE_EQ(forward[2].score_bytes, 2.5 * pass);
  EXPECT_DOUBLE_EQ(forward[3].flops, 2 * elements * 96);
  const auto backward = unfused_attention_kernels(unfused_test_attention(OpKind::attention_backward, false));
  ASSERT_EQ(backward.size(), 5u);  // dP, dV, softmax backward, dQ, dK
  double flops = 0, bytes = 0;
  for (const UnfusedAttentionKernel& k : backward) flops += k.flops, bytes += k.score_bytes;
  EXPECT_DOUBLE_EQ(bytes, 7 * pass);
  // Four products, twice the forward's two; every score computed (no causal skip), as the op vocabulary counts them.
  EXPECT_DOUBLE_EQ(flops, 2 * (forward[0].flops + forward[3].flops));
  EXPECT_DOUBLE_EQ(flops, attention_flops(unfused_test_attention(OpKind::attention_backward, false).attention, true));
  EXPECT_DOUBLE_EQ(memory_bound_bytes(unfused_test_attention(OpKind::attention_backward, true)), 9.5 * pass);
  Op flash = unfused_test_attention(OpKind::attention_forward, false);
  flash.attention.flash = true;
  EXPECT_THROW(unfused_attention_kernels(flash), std::logic_error);
}

// The reference, in float64: each kernel's time at the curves' efficiencies, a batched GEMM its FLOPs and its pass.
double reference_ns(const Op& op, const GpuKernelProfile& k, const GpuSpec& gpu) {
  double ns = 0;
  for (const UnfusedAttentionKernel& kernel : unfused_attention_kernels(op)) {
    ns += kernel.score_bytes / (gpu.hbm_bandwidth_GBps * k.memory_bound.at(kernel.score_bytes));  // 1 GB/s = 1 B/ns
    if (kernel.flops > 0) ns += kernel.flops / (gpu.peak_bf16_tflops * 1e3 * k.gemm.at(kernel.flops));
  }
  return ns;
}

TEST(UnfusedAttention, PricedKernelByKernelWithEachGemmsFlopsAndPass) {
  const GpuKernelProfile k = testing::curve_kernels("A100-SXM-80GB");
  for (const OpKind kind : {OpKind::attention_forward, OpKind::attention_backward})
    for (const bool dropout : {false, true}) {
      const Op op = unfused_test_attention(kind, dropout);
      const double priced = benchmark_kernel_time_ns(k, unfused_test_a100(), op);
      EXPECT_NEAR(priced, reference_ns(op, k, unfused_test_a100()), 1e-9 * priced);
    }
  // The backward's four products cost twice the forward's two (the flash count's 2.5 gone), and its softmax's 3 passes
  // stand against two forward softmaxes' 2: backward - 2 x forward = t(3 passes) - 2 t(2 passes).
  const Op forward = unfused_test_attention(OpKind::attention_forward, false);
  const Op backward = unfused_test_attention(OpKind::attention_backward, false);
  const auto passes_ns = [&](double passes) {
    const double bytes = passes * 2 * 8.0 * 24 * 2048 * 2048;
    return bytes / (unfused_test_a100().hbm_bandwidth_GBps * k.memory_bound.at(bytes));
  };
  EXPECT_NEAR(benchmark_kernel_time_ns(k, unfused_test_a100(), backward) -
                  2 * benchmark_kernel_time_ns(k, unfused_test_a100(), forward),
              passes_ns(3) - 2 * passes_ns(2), 1e-6 * passes_ns(1));
}

}  // namespace
}  // namespace twin
