// The block-wise recipe's host reference (tests/gpu/fp8_blockwise_test.cpp, fp8_linear_test.cpp): inputs with an
// outlier in every 128 x 128 block, and a copy quantized per block on the host exactly as the cast kernel does (the
// same scale rule per block, cuda_fp8.h's round-to-nearest saturating conversion), with its scale record in
// gpu/fp8_block_cast.hpp's layout and its values back as float64.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/fp8_block_cast.hpp"
#include "tests/gpu/fp8_test_util.hpp"

namespace twin::test {

constexpr std::int64_t kFp8Block = kernels::kFp8BlockLength;

// rows x cols bf16 values in [-1, 1) with one element of each 128 x 128 block a hundred times larger.
inline gpu::DeviceBuffer with_outliers(std::int64_t rows, std::int64_t cols) {
  gpu::DeviceBuffer x = random_bf16(rows * cols);
  std::vector<__nv_bfloat16> host(rows * cols);
  TWIN_CUDA_CHECK(cudaMemcpy(host.data(), x.data(), host.size() * 2, cudaMemcpyDeviceToHost));
  for (std::int64_t r = 0; r < rows; r += kFp8Block)
    for (std::int64_t c = 0; c < cols; c += kFp8Block) {
      const std::int64_t i = (r + (c / kFp8Block * 37) % std::min(kFp8Block, rows - r)) * cols + c;
      host[i] = __float2bfloat16(__bfloat162float(host[i]) * 100.0f + 50.0f);
    }
  TWIN_CUDA_CHECK(cudaMemcpy(x.data(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  return x;
}

// A copy (rows x cols of values `v`, cols the contraction dimension) quantized on the host per block as the kernel
// does: its bytes, its scale record (gpu/fp8_block_cast.hpp's layout) and its values dequantized.
struct HostBlocks {
  std::vector<std::uint8_t> bytes;
  std::vector<float> scale_inv;
  std::vector<double> dequantized;
};

inline HostBlocks quantize_blocks(const std::vector<double>& v, std::int64_t rows, std::int64_t cols,
                                  kernels::Fp8Scaling scaling) {
  const bool square = scaling == kernels::Fp8Scaling::blocks_128x128;
  const std::int64_t height = square ? kFp8Block : 1, row_blocks = (rows + height - 1) / height;
  const std::int64_t col_blocks = (cols + kFp8Block - 1) / kFp8Block;
  const std::int64_t ld = square ? (col_blocks + 3) / 4 * 4 : (rows + 3) / 4 * 4;
  HostBlocks q{std::vector<std::uint8_t>(v.size()),
               std::vector<float>(kernels::fp8_block_scale_floats(scaling, rows, cols)), std::vector<double>(v.size())};
  for (std::int64_t rb = 0; rb < row_blocks; ++rb)
    for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
      float amax = 0;
      for (std::int64_t r = rb * height; r < std::min(rows, (rb + 1) * height); ++r)
        for (std::int64_t c = cb * kFp8Block; c < std::min(cols, (cb + 1) * kFp8Block); ++c)
          amax = std::max(amax, static_cast<float>(std::fabs(v[r * cols + c])));
      const float scale = kernels::fp8_scale_for(amax, kernels::Fp8Type::e4m3);
      q.scale_inv[square ? rb * ld + cb : cb * ld + rb] = 1.0f / scale;
      for (std::int64_t r = rb * height; r < std::min(rows, (rb + 1) * height); ++r)
        for (std::int64_t c = cb * kFp8Block; c < std::min(cols, (cb + 1) * kFp8Block); ++c) {
          const std::int64_t i = r * cols + c;
          q.bytes[i] = __nv_cvt_float_to_fp8(static_cast<float>(v[i]) * scale, __NV_SATFINITE, __NV_E4M3);
          q.dequantized[i] = fp8_value(q.bytes[i], kernels::Fp8Type::e4m3) * (1.0f / scale);
        }
    }
  return q;
}

inline std::vector<double> transpose(const std::vector<double>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<double> out(v.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = v[r * cols + c];
  return out;
}

}  // namespace twin::test
