// The block-wise recipe's kernels against float64 references (issue 41, DeepSeek-V3's recipe): the cast
// (gpu/fp8_block_cast.hpp) of 1x128 and 128x128 blocks, every byte of both copies and every scale of their records
// against the host's quantization (the same scale rule per block and cuda_fp8.h's conversion); and cuBLASLt's
// block-scaled GEMM through the one FP8 entry (gpu/fp8_matmul.hpp) for the pairs the recipe's three GEMMs read
// (1x128 by 128x128 forward and data gradient, 1x128 by 1x128 weight gradient), against the float64 product of the
// dequantized operands. Inputs carry outliers one per 128 x 128 block, 100 times the rest: what block scaling is for.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/fp8_block_cast.hpp"
#include "gpu/fp8_matmul.hpp"
#include "tests/gpu/fp8_block_reference.hpp"

namespace twin::test {
namespace {

using kernels::Fp8Scaling;
using kernels::Fp8Type;

// The device's copy and scale record against the host's (rows of the record past the copy's are padding: skipped).
void expect_copy(const gpu::DeviceBuffer& data, const gpu::DeviceBuffer& scales, const HostBlocks& want,
                 const char* what) {
  EXPECT_EQ(bytes_to_host(data, want.bytes.size()), want.bytes) << what;
  const std::vector<double> got = f32_to_host(scales.data(), want.scale_inv.size());
  int differing = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (want.scale_inv[i] != 0 && static_cast<float>(got[i]) != want.scale_inv[i]) ++differing;
  EXPECT_EQ(differing, 0) << what << ": scales differing from the host's";
}

struct DeviceBlocks {
  gpu::DeviceBuffer rowwise, rowwise_scales, columnwise, columnwise_scales;
  DeviceBlocks(const gpu::DeviceBuffer& x, std::int64_t rows, std::int64_t cols, Fp8Scaling scaling)
      : rowwise(poisoned(rows * cols)),
        rowwise_scales(poisoned(kernels::fp8_block_scale_floats(scaling, rows, cols) * 4)),
        columnwise(poisoned(rows * cols)),
        columnwise_scales(poisoned(kernels::fp8_block_scale_floats(scaling, cols, rows) * 4)) {
    kernels::fp8_cast_blockwise(bf(x), rows, cols, Fp8Type::e4m3, scaling, static_cast<std::uint8_t*>(rowwise.data()),
                                f32(rowwise_scales), static_cast<std::uint8_t*>(columnwise.data()),
                                f32(columnwise_scales), nullptr);
  }
};

class Fp8BlockCastTest : public ::testing::TestWithParam<Fp8Scaling> {};

TEST_P(Fp8BlockCastTest, BothCopiesAndTheirScalesMatchTheHostQuantization) {
  REQUIRE_GPU();
  const std::int64_t rows = 200, cols = 328;  // partial blocks on both sides
  const gpu::DeviceBuffer x = with_outliers(rows, cols);
  const std::vector<double> hx = bf16_to_host(x.data(), rows * cols);
  const DeviceBlocks d(x, rows, cols, GetParam());
  expect_copy(d.rowwise, d.rowwise_scales, quantize_blocks(hx, rows, cols, GetParam()), "rowwise");
  expect_copy(d.columnwise, d.columnwise_scales, quantize_blocks(transpose(hx, rows, cols), cols, rows, GetParam()),
              "columnwise");
}

INSTANTIATE_TEST_SUITE_P(Blocks, Fp8BlockCastTest,
                         ::testing::Values(Fp8Scaling::blocks_1x128, Fp8Scaling::blocks_128x128));

// Rows of a width that is no multiple of 8 take the cast's 8-byte loads instead of its 16-byte ones: the same bytes.
TEST(Fp8BlockCast, WidthsOfFourTakeTheNarrowLoadsAndTheSameBytes) {
  REQUIRE_GPU();
  const std::int64_t rows = 136, cols = 260;
  const gpu::DeviceBuffer x = with_outliers(rows, cols);
  const std::vector<double> hx = bf16_to_host(x.data(), rows * cols);
  for (const Fp8Scaling scaling : {Fp8Scaling::blocks_1x128, Fp8Scaling::blocks_128x128}) {
    const DeviceBlocks d(x, rows, cols, scaling);
    expect_copy(d.rowwise, d.rowwise_scales, quantize_blocks(hx, rows, cols, scaling), "rowwise");
    expect_copy(d.columnwise, d.columnwise_scales, quantize_blocks(transpose(hx, rows, cols), cols, rows, scaling),
                "columnwise");
  }
}

// A block of near-zero values beside zeros (the first 1x128 row, and the first 128 x 128 tile: 2e-37 and 0 in
// turn, the rest of the tensor ordinary): its scale is the largest float, not infinity, so its zeros stay zeros
// (E4M3's NaN is 0x7f or 0xff) and the bytes and scales are the host's.
TEST(Fp8BlockCast, NearZeroBlocksBesideZerosQuantizeToNumbers) {
  REQUIRE_GPU();
  const std::int64_t rows = 256, cols = 256;
  gpu::DeviceBuffer x = random_bf16(rows * cols);
  std::vector<__nv_bfloat16> host(rows * cols);
  TWIN_CUDA_CHECK(cudaMemcpy(host.data(), x.data(), host.size() * 2, cudaMemcpyDeviceToHost));
  for (std::int64_t r = 0; r < kFp8Block; ++r)
    for (std::int64_t c = 0; c < kFp8Block; ++c) host[r * cols + c] = __float2bfloat16((r + c) % 2 ? 2e-37f : 0.0f);
  TWIN_CUDA_CHECK(cudaMemcpy(x.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  const std::vector<double> hx = bf16_to_host(x.data(), rows * cols);
  for (const Fp8Scaling scaling : {Fp8Scaling::blocks_1x128, Fp8Scaling::blocks_128x128}) {
    const DeviceBlocks d(x, rows, cols, scaling);
    const HostBlocks want = quantize_blocks(hx, rows, cols, scaling);
    expect_copy(d.rowwise, d.rowwise_scales, want, "rowwise");
    int nan_bytes = 0;
    for (const std::uint8_t byte : bytes_to_host(d.rowwise, rows * cols)) nan_bytes += (byte & 0x7f) == 0x7f;
    EXPECT_EQ(nan_bytes, 0);
  }
}

// C[m,n] = A[m,k] B[n,k]^T with A's blocks `a` and B's `b`, against float64 of the dequantized operands; the
// quantization's own error against the bf16 operands is reported beside.
void check_block_product(Fp8Scaling a, Fp8Scaling b) {
  const std::int64_t m = 256, n = 384, k = 512;
  const gpu::DeviceBuffer x = with_outliers(m, k), w = with_outliers(n, k);
  const std::vector<double> hx = bf16_to_host(x.data(), m * k), hw = bf16_to_host(w.data(), n * k);
  const DeviceBlocks da(x, m, k, a), db(w, n, k, b);
  const HostBlocks qa = quantize_blocks(hx, m, k, a), qb = quantize_blocks(hw, n, k, b);
  auto c = poisoned(m * n * 2);
  exec::Fp8Matmul matmul;
  exec::Fp8MatmulProblem problem{m, n, k, false, false, false, a, b};
  matmul.run(problem, da.rowwise.data(), f32(da.rowwise_scales), db.rowwise.data(), f32(db.rowwise_scales), bf(c),
             nullptr);
  std::vector<double> ref(m * n), exact(m * n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, sum_exact = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        sum += qa.dequantized[i * k + p] * qb.dequantized[j * k + p];
        sum_exact += hx[i * k + p] * hw[j * k + p];
      }
      ref[i * n + j] = sum;
      exact[i * n + j] = sum_exact;
    }
  const std::vector<double> got = bf16_to_host(c.data(), m * n);
  // The GEMM itself: FP32 accumulation with the scales applied per block of k, a bf16 product.
  EXPECT_LT(report("blockwise gemm vs float64 of operands", relative_error(got, ref)), kBf16Tolerance);
  // E4M3 with a scale per block: the product within FP8's rounding of the unquantized one.
  EXPECT_LT(report("blockwise gemm vs float64 of bf16", relative_error(got, exact)), 0.05);
}

TEST(Fp8BlockMatmul, ActivationBlocksTimesWeightBlocks) {  // forward and data gradient
  REQUIRE_GPU();
  check_block_product(Fp8Scaling::blocks_1x128, Fp8Scaling::blocks_128x128);
}
TEST(Fp8BlockMatmul, ActivationBlocksTimesGradientBlocks) {  // weight gradient
  REQUIRE_GPU();
  check_block_product(Fp8Scaling::blocks_1x128, Fp8Scaling::blocks_1x128);
}

TEST(Fp8BlockMatmul, RefusesPairsCublasLtDoesNotRun) {
  REQUIRE_GPU();
  auto buffer = poisoned(128 * 128 * 2);
  auto scales = upload(std::vector<float>(64, 1.0f));
  exec::Fp8Matmul matmul;
  for (const auto& [a, b] : {std::pair{Fp8Scaling::blocks_128x128, Fp8Scaling::blocks_128x128},
                             std::pair{Fp8Scaling::blocks_1x128, Fp8Scaling::per_tensor}}) {
    const exec::Fp8MatmulProblem problem{128, 128, 128, false, false, false, a, b};
    EXPECT_THROW(matmul.run(problem, buffer.data(), f32(scales), buffer.data(), f32(scales), bf(buffer), nullptr),
                 std::invalid_argument);
  }
}

}  // namespace
}  // namespace twin::test
