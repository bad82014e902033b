// FP8 linears' kernels against float64 references (issue 41 item 3): the current-scaling cast (its amax, its scale
// and every byte of both copies, quantized on the host exactly as the kernel quantizes: the same scale rule and the
// same round-to-nearest saturating conversion of cuda_fp8.h) and cuBLASLt's FP8 GEMM through the executor's entry
// (gpu/fp8_matmul.hpp), judged against the float64 product of the dequantized operands. The quantization error
// itself is stated beside: the FP8 product against the float64 product of the bf16 tensors before the cast.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gpu/fp8_matmul.hpp"
#include "gpu/op_kernels.hpp"
#include "tests/gpu/fp8_test_util.hpp"

namespace twin::test {
namespace {

using kernels::Fp8Type;

class Fp8CastTest : public ::testing::TestWithParam<Fp8Type> {};

TEST_P(Fp8CastTest, AmaxScaleAndBothCopiesMatchTheHostQuantization) {
  REQUIRE_GPU();
  const Fp8Type type = GetParam();
  const std::int64_t rows = 200, cols = 328;  // not multiples of the 64 x 64 tile
  auto x = random_bf16(rows * cols, 3.0);
  const std::vector<double> hx = bf16_to_host(x.data(), rows * cols);
  auto rowwise = poisoned(rows * cols), columnwise = poisoned(rows * cols);
  auto scaling = poisoned(kernels::kFp8ScalingFloats * 4);
  gpu::launch(gpu::Fp8Cast{bf(x), rows, cols, type, static_cast<std::uint8_t*>(rowwise.data()),
                           static_cast<std::uint8_t*>(columnwise.data()), f32(scaling)},
              nullptr);
  const HostFp8 ref = quantize_on_host(hx, type);
  const std::vector<double> record = f32_to_host(scaling.data(), 2);
  EXPECT_EQ(record[0], ref.scale_inv);
  EXPECT_EQ(record[1], ref.amax);
  EXPECT_EQ(bytes_to_host(rowwise, rows * cols), ref.bytes);
  EXPECT_EQ(bytes_to_host(columnwise, rows * cols), transposed(ref.bytes, rows, cols));
  // The cast's own error: E4M3 keeps 3 mantissa bits (relative rounding at most 2^-4), E5M2 2 (2^-3).
  const double error = report(type == Fp8Type::e4m3 ? "fp8 cast e4m3 vs bf16" : "fp8 cast e5m2 vs bf16",
                              relative_error(ref.dequantized(), hx));
  EXPECT_LT(error, type == Fp8Type::e4m3 ? 0.04 : 0.08);
}

INSTANTIATE_TEST_SUITE_P(Types, Fp8CastTest, ::testing::Values(Fp8Type::e4m3, Fp8Type::e5m2));

TEST(Fp8Cast, AllZerosTakeScaleOneAndTheRowwiseCopyAlone) {
  REQUIRE_GPU();
  const std::int64_t rows = 64, cols = 96;
  gpu::DeviceBuffer x(rows * cols * 2);
  TWIN_CUDA_CHECK(cudaMemset(x.data(), 0, rows * cols * 2));
  auto rowwise = poisoned(rows * cols), scaling = poisoned(kernels::kFp8ScalingFloats * 4);
  gpu::launch(gpu::Fp8Cast{bf(x), rows, cols, Fp8Type::e4m3, static_cast<std::uint8_t*>(rowwise.data()), nullptr,
                           f32(scaling)},
              nullptr);
  EXPECT_EQ(f32_to_host(scaling.data(), 2), (std::vector<double>{1.0, 0.0}));
  EXPECT_EQ(bytes_to_host(rowwise, rows * cols), std::vector<std::uint8_t>(rows * cols, 0));
}

// An amax so small that fp8_max / amax overflows takes the largest float, as Transformer Engine's rule does, not
// infinity, which quantizes the zeros beside it to NaN (0 x inf). No GPU needed: the host and the kernels share it.
TEST(Fp8Scale, AnAmaxTooSmallForItsScaleTakesTheLargestFloat) {
  for (const Fp8Type type : {Fp8Type::e4m3, Fp8Type::e5m2}) {
    const float tiny = kernels::fp8_scale_for(2e-37f, type);
    EXPECT_EQ(tiny, std::numeric_limits<float>::max());
    EXPECT_EQ(0.0f * tiny, 0.0f);
    EXPECT_EQ(kernels::fp8_scale_for(0.5f, type), kernels::fp8_max(type) / 0.5f);
    EXPECT_EQ(kernels::fp8_scale_for(0.0f, type), 1.0f);
    EXPECT_EQ(kernels::fp8_scale_for(std::numeric_limits<float>::infinity(), type), 1.0f);
    EXPECT_EQ(kernels::fp8_scale_for(std::numeric_limits<float>::quiet_NaN(), type), 1.0f);
  }
}

// C[m,n] = A[m,k] B[n,k]^T with each operand's type; `accumulate` adds to a random C; `with_bias` adds a bf16 bias
// of n in the epilogue (an FP8 linear's forward).
void check_product(Fp8Type a_type, Fp8Type b_type, bool accumulate, bool with_bias = false) {
  const std::int64_t m = 192, n = 320, k = 448;
  auto a = random_bf16(m * k, 2.0), b = random_bf16(n * k, 0.5), c = random_bf16(m * n), bias = random_bf16(n);
  const std::vector<double> ha = bf16_to_host(a.data(), m * k), hb = bf16_to_host(b.data(), n * k);
  const std::vector<double> start = bf16_to_host(c.data(), m * n), hbias = bf16_to_host(bias.data(), n);
  const HostFp8 qa = quantize_on_host(ha, a_type), qb = quantize_on_host(hb, b_type);
  auto da = upload(qa.bytes), db = upload(qb.bytes);
  auto scales = upload(std::vector<float>{qa.scale_inv, 0, 0, 0, qb.scale_inv});  // each 16-byte aligned
  exec::Fp8Matmul matmul;
  exec::Fp8MatmulProblem problem{m, n, k, a_type == Fp8Type::e5m2, b_type == Fp8Type::e5m2, accumulate};
  problem.bias = with_bias;
  ASSERT_TRUE(matmul.supports(problem));
  matmul.run(problem, da.data(), f32(scales), db.data(), f32(scales) + 4, bf(c), nullptr,
             with_bias ? bf(bias) : nullptr);
  const std::vector<double> fa = qa.dequantized(), fb = qb.dequantized();
  std::vector<double> ref(m * n), exact(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, sum_exact = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        sum += fa[i * k + p] * fb[j * k + p];
        sum_exact += ha[i * k + p] * hb[j * k + p];
      }
      const double added = (accumulate ? start[i * n + j] : 0) + (with_bias ? hbias[j] : 0);
      ref[i * n + j] = sum + added;
      exact[i * n + j] = sum_exact + added;
    }
  const std::vector<double> got = bf16_to_host(c.data(), m * n);
  // The GEMM itself: fp32 accumulation (fast where no operand is E5M2) and a bf16 product.
  EXPECT_LT(report("fp8 gemm vs float64 of its operands", relative_error(got, ref)), kBf16Tolerance);
  // The recipe's error beside it (no assertion of quality beyond FP8's rounding): against the unquantized product.
  const double quantized = report("fp8 gemm vs float64 of bf16 inputs", relative_error(got, exact));
  EXPECT_LT(quantized, a_type == Fp8Type::e5m2 || b_type == Fp8Type::e5m2 ? 0.08 : 0.05);
}

TEST(Fp8Matmul, E4m3TimesE4m3) {
  REQUIRE_GPU();
  check_product(Fp8Type::e4m3, Fp8Type::e4m3, false);
}
TEST(Fp8Matmul, E5m2GradientAsEitherOperandAccumulating) {
  REQUIRE_GPU();
  check_product(Fp8Type::e5m2, Fp8Type::e4m3, false);  // a data gradient: dY rowwise times W
  check_product(Fp8Type::e4m3, Fp8Type::e5m2, true);   // a weight gradient: X^T dY added to the one before
}

// A linear's bias in the FP8 GEMM's epilogue, as Transformer Engine's FP8 GEMM adds it (twin execute's FP8 linears
// with add_bias_linear, executor/gpu/fp8_linears.hpp).
TEST(Fp8Matmul, BiasInTheEpilogue) {
  REQUIRE_GPU();
  check_product(Fp8Type::e4m3, Fp8Type::e4m3, false, true);
}

TEST(Fp8Matmul, RefusesDimensionsCublasLtCannotRunInFp8) {
  REQUIRE_GPU();
  auto buffer = poisoned(64 * 64 * 2);
  auto scales = upload(std::vector<float>{1.0f, 1.0f});
  exec::Fp8Matmul matmul;
  EXPECT_THROW(matmul.run({64, 64, 40, false, false, false}, buffer.data(), f32(scales), buffer.data(), f32(scales),
                          bf(buffer), nullptr),
               std::invalid_argument);
  EXPECT_THROW(matmul.run({64, 64, 64, true, true, false}, buffer.data(), f32(scales), buffer.data(), f32(scales),
                          bf(buffer), nullptr),
               std::invalid_argument);
  EXPECT_THROW(matmul.run({64, 64, 64, false, false, false}, buffer.data(), f32(scales), buffer.data(), f32(scales) + 1,
                          bf(buffer), nullptr),
               std::invalid_argument);  // a scale pointer off 16 bytes
  exec::Fp8MatmulProblem biased{64, 64, 64, false, false, false};
  biased.bias = true;  // a bias epilogue without its pointer
  EXPECT_THROW(matmul.run(biased, buffer.data(), f32(scales), buffer.data(), f32(scales), bf(buffer), nullptr),
               std::invalid_argument);
  EXPECT_FALSE(matmul.supports({64, 64, 40, false, false, false}));
}

}  // namespace
}  // namespace twin::test
