// Where a weight gradient's product goes (Op::gemm_output, core/op.hpp): the key names it and reads back; a GEMM that
// writes or adds to an fp32 gradient buffer is priced as its product plus the wider write at the memory-bound curve,
// one adding to a 16-bit buffer as its product, unless its own key was measured (a folded trace); none of them is a
// neighbour of plain products.
#include <gtest/gtest.h>

#include "cost/gemm_predictor.hpp"
#include "cost/memory_bound_bytes.hpp"
#include "cost/profile.hpp"
#include "cost/shape_space.hpp"
#include "tests/cost/curve_kernels.hpp"

namespace twin {
namespace {

const GpuSpec& output_test_gpu() {
  static const GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  return gpu;
}

Op wgrad_op(GemmOutput output, std::int64_t m = 4096, std::int64_t n = 11008, std::int64_t k = 8192) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm_pass = GemmPass::weight_gradient;
  op.gemm = {m, n, k, 1, true, false};
  op.gemm_output = output;
  op.flops = 2.0 * double(m) * double(n) * double(k);
  return op;
}

// What the memory-bound curve charges for `bytes`, as an elementwise op moving them.
double buffer_bytes_ns(const GpuKernelProfile& k, double bytes) {
  Op moved;
  moved.kind = OpKind::elementwise;
  moved.bytes = static_cast<Bytes>(bytes);
  return benchmark_kernel_time_ns(k, output_test_gpu(), moved);
}

TEST(GemmOutputPricing, KeysNameTheOutputAndReadBack) {
  EXPECT_EQ(kernel_shape_key(wgrad_op(GemmOutput::written)), "gemm:m=4096,n=11008,k=8192,count=1,ta=1,tb=0");
  for (GemmOutput output : {GemmOutput::written_fp32, GemmOutput::added, GemmOutput::added_fp32}) {
    const std::string key = kernel_shape_key(wgrad_op(output));
    EXPECT_EQ(key, "gemm:m=4096,n=11008,k=8192,count=1,ta=1,tb=0,output=" + to_string(output));
    const auto back = op_from_kernel_key(key);
    ASSERT_TRUE(back) << key;
    EXPECT_EQ(back->gemm_output, output);
    EXPECT_FALSE(gemm_shape_from_key(key)) << "its time holds the buffer's bytes: no neighbour of plain products";
  }
  EXPECT_FALSE(op_from_kernel_key("gemm:m=1,n=1,k=1,count=1,ta=0,tb=0,output=stored"));
}

TEST(GemmOutputPricing, TheBufferBytesBeyondASixteenBitWrite) {
  const double elements = 4096.0 * 11008;
  EXPECT_EQ(epilogue_addend_bytes(wgrad_op(GemmOutput::written)), 0);
  EXPECT_EQ(epilogue_addend_bytes(wgrad_op(GemmOutput::written_fp32)), 2 * elements);
  EXPECT_EQ(epilogue_addend_bytes(wgrad_op(GemmOutput::added)), 0) << "the read of C hides under the main loop";
  EXPECT_EQ(epilogue_addend_bytes(wgrad_op(GemmOutput::added_fp32)), 2 * elements);
  Op both = wgrad_op(GemmOutput::added_fp32);
  both.fuses_residual = true;
  EXPECT_EQ(epilogue_addend_bytes(both), 4 * elements);
}

TEST(GemmOutputPricing, PricedAsTheMeasuredProductPlusTheBufferBytes) {
  GpuKernelProfile k = testing::curve_kernels("H100-SXM-80GB");
  k.measured[kernel_shape_key(wgrad_op(GemmOutput::written))] = {1.0e6, 1.0e6, 1.0e6, 5};
  index_measured_shapes(k);
  const double elements = 4096.0 * 11008;
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, output_test_gpu(), wgrad_op(GemmOutput::written)), 1.0e6);
  for (GemmOutput output : {GemmOutput::written_fp32, GemmOutput::added_fp32}) {
    SCOPED_TRACE(to_string(output));
    const double price = benchmark_kernel_time_ns(k, output_test_gpu(), wgrad_op(output));
    EXPECT_NEAR(price, 1.0e6 + buffer_bytes_ns(k, 2 * elements), 1.0e6 * 0.005);
    EXPECT_GT(price, 1.0e6);
  }
  EXPECT_NEAR(benchmark_kernel_time_ns(k, output_test_gpu(), wgrad_op(GemmOutput::added)), 1.0e6, 1.0e6 * 0.005);
  // Its own key measured (a fold of a run's trace) wins.
  k.measured[kernel_shape_key(wgrad_op(GemmOutput::added))] = {1.2e6, 1.2e6, 1.2e6, 5};
  index_measured_shapes(k);
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, output_test_gpu(), wgrad_op(GemmOutput::added)), 1.2e6);
  EXPECT_DOUBLE_EQ(benchmark_kernel_time_ns(k, output_test_gpu(), wgrad_op(GemmOutput::written)), 1.0e6);
}

}  // namespace
}  // namespace twin
