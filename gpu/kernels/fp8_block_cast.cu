// Block-wise scaling in one kernel: a block of 256 threads loads a 128 x 128 tile of x into shared memory, then each
// warp quantizes 16 of its rows (the rowwise copy) and 16 of its columns (the columnwise copy), taking each row's
// or column's amax itself (1x128) or the tile's (128 x 128). Lanes read elements lane + 32 j of a row or column, so
// the tile's padded rows (65 words) keep a column's reads on distinct banks, and each copy is written 32 bytes a
// step along its own rows. No atomics: the same tensor gives the same bytes.
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/fp8_block_cast.hpp"
#include "gpu/kernels/common.cuh"
#include "gpu/kernels/fp8_tile.cuh"

namespace twin::kernels {
namespace {

constexpr int kBlock = static_cast<int>(kFp8BlockLength);
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLinesPerWarp = kBlock / kWarps;
constexpr int kPerLane = kBlock / 32;

std::int64_t round_up(std::int64_t value, std::int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
std::int64_t blocks_of(std::int64_t length) { return (length + kBlock - 1) / kBlock; }

struct Copy {
  std::uint8_t* data;
  float* scale_inv;
  std::int64_t rows, cols;   // of the copy (the transpose's for the columnwise one)
  std::int64_t scale_ld;     // floats between two block rows of the scale record
};

// Quantizes the tile's lines (rows of the copy) with the copy's scales. `transpose`: the copy's line l is the tile's
// column l. `tile_scale` > 0: one scale for the tile (128 x 128 blocks; its record written by the caller).
template <bool kTranspose>
__device__ void write_copy(const __nv_bfloat16 (*tile)[kBlock + 2], const Copy& copy, std::int64_t line0,
                           std::int64_t elem0, Fp8Type type, float tile_scale) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = 0; i < kLinesPerWarp; ++i) {
    const int l = warp * kLinesPerWarp + i;
    float v[kPerLane];
    float amax = 0.0f;
    for (int j = 0; j < kPerLane; ++j) {
      const int e = lane + 32 * j;
      v[j] = __bfloat162float(kTranspose ? tile[e][l] : tile[l][e]);
      amax = fmaxf(amax, fabsf(v[j]));
    }
    const std::int64_t line = line0 + l;
    float scale = tile_scale;
    if (tile_scale <= 0.0f) {
      scale = fp8_scale_for(detail::warp_max(amax), type);
      if (lane == 0 && line < copy.rows) copy.scale_inv[(elem0 / kBlock) * copy.scale_ld + line] = 1.0f / scale;
    }
    if (line >= copy.rows) continue;
    for (int j = 0; j < kPerLane; ++j) {
      const std::int64_t e = elem0 + lane + 32 * j;
      if (e < copy.cols) copy.data[line * copy.cols + e] = detail::quantize(v[j], scale, type);
    }
  }
}

__global__ void block_cast_kernel(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                                  bool square, Copy rowwise, Copy columnwise) {
  __shared__ __nv_bfloat16 tile[kBlock][kBlock + 2];
  __shared__ float scratch[32];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kBlock;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kBlock;
  float local = 0.0f;
  for (int g = threadIdx.x; g < kBlock * kBlock / 4; g += kThreads) {  // 4 elements an 8-byte load (cols % 4 == 0)
    const int r = g / (kBlock / 4), c = g % (kBlock / 4) * 4;
    const std::int64_t row = row0 + r, col = col0 + c;
    uint2 bits = {0u, 0u};
    if (row < rows && col < cols) bits = *reinterpret_cast<const uint2*>(x + row * cols + col);
    const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&bits.x);
    const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&bits.y);
    *reinterpret_cast<__nv_bfloat162*>(&tile[r][c]) = lo;
    *reinterpret_cast<__nv_bfloat162*>(&tile[r][c + 2]) = hi;
    const float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
    local = fmaxf(local, fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y))));
  }
  __syncthreads();
  float tile_scale = 0.0f;
  if (square) {
    tile_scale = fp8_scale_for(detail::block_max(local, scratch), type);
    if (threadIdx.x == 0) {
      rowwise.scale_inv[(row0 / kBlock) * rowwise.scale_ld + col0 / kBlock] = 1.0f / tile_scale;
      if (columnwise.data != nullptr)
        columnwise.scale_inv[(col0 / kBlock) * columnwise.scale_ld + row0 / kBlock] = 1.0f / tile_scale;
    }
  }
  write_copy<false>(tile, rowwise, row0, col0, type, tile_scale);
  if (columnwise.data != nullptr) write_copy<true>(tile, columnwise, col0, row0, type, tile_scale);
}

// The record's leading dimension for a copy of rows x cols: 1x128's rows rounded to 4, 128x128's column blocks.
std::int64_t scale_ld(Fp8Scaling scaling, std::int64_t rows, std::int64_t cols) {
  return scaling == Fp8Scaling::blocks_1x128 ? round_up(rows, 4) : round_up(blocks_of(cols), 4);
}

}  // namespace

std::int64_t fp8_block_scale_floats(Fp8Scaling scaling, std::int64_t rows, std::int64_t cols) {
  switch (scaling) {
    case Fp8Scaling::per_tensor: return 1;
    case Fp8Scaling::blocks_1x128: return blocks_of(cols) * scale_ld(scaling, rows, cols);
    case Fp8Scaling::blocks_128x128: return blocks_of(rows) * scale_ld(scaling, rows, cols);
  }
  return 1;
}

void fp8_cast_blockwise(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                        Fp8Scaling scaling, std::uint8_t* rowwise, float* rowwise_scale_inv, std::uint8_t* columnwise,
                        float* columnwise_scale_inv, cudaStream_t stream) {
  if (scaling == Fp8Scaling::per_tensor) throw std::invalid_argument("fp8_cast_blockwise: per-tensor scaling asked");
  if (rows <= 0 || cols <= 0 || rows % 4 || cols % 4 || reinterpret_cast<std::uintptr_t>(x) % 8)
    throw std::invalid_argument(fmt::format(
        "fp8_cast_blockwise: {} x {} (rows and cols positive multiples of 4, x 8-byte aligned)", rows, cols));
  const bool square = scaling == Fp8Scaling::blocks_128x128;
  const Copy row_copy{rowwise, rowwise_scale_inv, rows, cols, scale_ld(scaling, rows, cols)};
  const Copy column_copy{columnwise, columnwise_scale_inv, cols, rows, scale_ld(scaling, cols, rows)};
  const dim3 grid(static_cast<unsigned>(blocks_of(cols)), static_cast<unsigned>(blocks_of(rows)));
  block_cast_kernel<<<grid, kThreads, 0, stream>>>(x, rows, cols, type, square, row_copy, column_copy);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
