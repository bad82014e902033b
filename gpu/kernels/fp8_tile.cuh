// The FP8 casts' tile (gpu/kernels/fp8_cast.cu for current scaling, fp8_delayed_cast.cu for delayed scaling): a
// block of 256 threads quantizes a 64 x 64 tile with one scale into the rowwise copy and, through shared memory so
// that both copies are written along their rows, the columnwise copy (the transpose).
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "gpu/fp8_cast.hpp"
#include "gpu/kernels/common.cuh"

namespace twin::kernels::detail {

constexpr int kCastThreads = 256;
constexpr int kTile = 64;  // a cast block's tile: 64 x 64 elements, 256 threads as 16 x 16 of 4 elements x 4 rows

__device__ __forceinline__ std::uint8_t quantize(float x, float scale, Fp8Type type) {
  const __nv_fp8_interpretation_t kind = type == Fp8Type::e4m3 ? __NV_E4M3 : __NV_E5M2;
  return __nv_cvt_float_to_fp8(x * scale, __NV_SATFINITE, kind);
}

// Quantizes the block's 64 x 64 tile of x with `scale` into the rowwise copy and, where not null, the columnwise
// one (through shared memory, so that both are written along their rows). Every thread of the block calls it (it
// holds a barrier); with kAmax each returns the largest |x| it read (delayed scaling's amax, taken by the cast).
template <bool kAmax>
__device__ float quantize_tile(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type, float scale,
                               std::uint8_t* rowwise, std::uint8_t* columnwise, std::uint8_t (*tile)[kTile + 4]) {
  float local = 0.0f;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile, col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int c = tx * 4;
  const bool vector = cols % 4 == 0 && reinterpret_cast<std::uintptr_t>(x) % 8 == 0 &&
                      reinterpret_cast<std::uintptr_t>(rowwise) % 4 == 0;
  for (int r = ty; r < kTile; r += 16) {
    const std::int64_t row = row0 + r;
    if (vector) {  // 4 elements as one 8-byte load and one 4-byte store (cols a multiple of 4: all in or all out)
      if (row >= rows || col0 + c >= cols) continue;
      const uint2 bits = *reinterpret_cast<const uint2*>(x + row * cols + col0 + c);
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits.x));
      const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits.y));
      if (kAmax) local = fmaxf(local, fmaxf(fmaxf(fabsf(lo.x), fabsf(lo.y)), fmaxf(fabsf(hi.x), fabsf(hi.y))));
      const std::uint8_t q[4] = {quantize(lo.x, scale, type), quantize(lo.y, scale, type), quantize(hi.x, scale, type),
                                 quantize(hi.y, scale, type)};
      *reinterpret_cast<std::uint32_t*>(rowwise + row * cols + col0 + c) =
          q[0] | q[1] << 8 | q[2] << 16 | static_cast<std::uint32_t>(q[3]) << 24;
      for (int j = 0; j < 4; ++j) tile[r][c + j] = q[j];
      continue;
    }
    for (int j = 0; j < 4; ++j) {
      const std::int64_t col = col0 + c + j;
      if (row >= rows || col >= cols) continue;
      const float v = __bfloat162float(x[row * cols + col]);
      if (kAmax) local = fmaxf(local, fabsf(v));
      const std::uint8_t q = quantize(v, scale, type);
      rowwise[row * cols + col] = q;
      tile[r][c + j] = q;
    }
  }
  if (columnwise == nullptr) return local;
  __syncthreads();
  // The transpose: thread (x, y) writes 4 consecutive input rows of input columns y, y + 16, ...
  const int r = tx * 4;
  for (int cc = ty; cc < kTile; cc += 16) {
    const std::int64_t col = col0 + cc, row = row0 + r;
    if (col >= cols || row >= rows) continue;  // rows a multiple of 4: the 4 rows are in or out together
    const std::uint32_t word = tile[r][cc] | tile[r + 1][cc] << 8 | tile[r + 2][cc] << 16 |
                               static_cast<std::uint32_t>(tile[r + 3][cc]) << 24;
    *reinterpret_cast<std::uint32_t*>(columnwise + col * rows + row) = word;
  }
  return local;
}

// The cast's grid (a block per tile), after checking what the tile needs of the shapes; throws otherwise.
inline dim3 cast_grid(std::int64_t rows, std::int64_t cols, const std::uint8_t* columnwise) {
  require(rows > 0 && cols > 0, "fp8 cast: rows and cols must be positive");
  require(columnwise == nullptr || (rows % 4 == 0 && cols % 4 == 0),
          "fp8 cast: a columnwise copy needs rows and cols multiples of 4");
  require(columnwise == nullptr || reinterpret_cast<std::uintptr_t>(columnwise) % 4 == 0,
          "fp8 cast: the columnwise copy must be 4-byte aligned");
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  require(grid.y <= 65535, "fp8 cast: too many rows for one launch");
  return grid;
}

}  // namespace twin::kernels::detail
