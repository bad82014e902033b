// Block-wise scaling in one kernel: a block of 256 threads loads a 128 x 128 tile of x into shared memory (16-byte
// loads where the rows allow), then each warp quantizes 16 of its rows (the rowwise copy) and 16 of its columns (the
// columnwise copy), taking each row's or column's amax itself (1x128) or the tile's (128 x 128). Lanes read elements
// lane + 32 j of a row or column, so the tile's padded rows (65 words) keep a column's reads on distinct banks; four
// shuffles then hand each lane the 4 consecutive bytes it stores, so that a warp writes a line's 128 bytes with one
// 4-byte store per lane (1-byte stores left the cast at 1.38 TB/s on an H200 against the per-tensor casts' 2.0).
// No atomics: the same tensor gives the same bytes.
#include <stdexcept>
#include <type_traits>

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

// The 4 bytes lane `lane` stores of a line, elements 4 lane .. 4 lane + 3, from each lane's `packed` bytes of its
// elements lane + 32 j (byte j): element 4 lane + t is byte lane / 8 of lane (4 lane + t) % 32.
__device__ __forceinline__ std::uint32_t bytes_for_lane(std::uint32_t packed, int lane) {
  const int shift = 8 * (lane / 8);
  std::uint32_t word = 0;
  for (int t = 0; t < 4; ++t)
    word |= ((__shfl_sync(0xffffffffu, packed, (4 * lane + t) % 32) >> shift) & 0xffu) << (8 * t);
  return word;
}

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
    if (line >= copy.rows) continue;  // the same for the whole warp: its shuffles below see every lane
    std::uint32_t packed = 0;
    for (int j = 0; j < kPerLane; ++j)
      packed |= static_cast<std::uint32_t>(detail::quantize(v[j], scale, type)) << (8 * j);
    const std::uint32_t word = bytes_for_lane(packed, lane);
    const std::int64_t e = elem0 + 4 * lane;  // copy.cols a multiple of 4: the 4 bytes are in or out together
    if (e < copy.cols) *reinterpret_cast<std::uint32_t*>(copy.data + line * copy.cols + e) = word;
  }
}

// Loads the block's tile of x into `tile` (zeros past the edges), kVec elements a load (8: 16 bytes, where cols is a
// multiple of 8 and x 16-byte aligned; else 4), and returns the largest |x| this thread read.
template <int kVec>
__device__ float load_tile(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, std::int64_t row0,
                           std::int64_t col0, __nv_bfloat16 (*tile)[kBlock + 2]) {
  using Bits = std::conditional_t<kVec == 8, uint4, uint2>;
  float local = 0.0f;
  for (int g = threadIdx.x; g < kBlock * kBlock / kVec; g += kThreads) {
    const int r = g / (kBlock / kVec), c = g % (kBlock / kVec) * kVec;
    const std::int64_t row = row0 + r, col = col0 + c;
    Bits bits{};
    if (row < rows && col < cols) bits = *reinterpret_cast<const Bits*>(x + row * cols + col);
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&bits);
    for (int p = 0; p < kVec / 2; ++p) {  // rows of the tile are 4-byte aligned: pairs, not the whole load
      *reinterpret_cast<__nv_bfloat162*>(&tile[r][c + 2 * p]) = pairs[p];
      const float2 f = __bfloat1622float2(pairs[p]);
      local = fmaxf(local, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  }
  return local;
}

template <int kVec>
__global__ void block_cast_kernel(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                                  bool square, Copy rowwise, Copy columnwise) {
  __shared__ __nv_bfloat16 tile[kBlock][kBlock + 2];
  __shared__ float scratch[32];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kBlock;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kBlock;
  const float local = load_tile<kVec>(x, rows, cols, row0, col0, tile);
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
  const auto aligned = [](const void* p, std::uintptr_t bytes) {
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
  };
  if (rows <= 0 || cols <= 0 || rows % 4 || cols % 4 || !aligned(x, 8) || !aligned(rowwise, 4) ||
      !aligned(columnwise, 4))
    throw std::invalid_argument(fmt::format("fp8_cast_blockwise: {} x {} (rows and cols positive multiples of 4, x "
                                            "8-byte aligned, the copies 4-byte aligned)", rows, cols));
  const bool square = scaling == Fp8Scaling::blocks_128x128;
  const Copy row_copy{rowwise, rowwise_scale_inv, rows, cols, scale_ld(scaling, rows, cols)};
  const Copy column_copy{columnwise, columnwise_scale_inv, cols, rows, scale_ld(scaling, cols, rows)};
  const dim3 grid(static_cast<unsigned>(blocks_of(cols)), static_cast<unsigned>(blocks_of(rows)));
  if (cols % 8 == 0 && aligned(x, 16))
    block_cast_kernel<8><<<grid, kThreads, 0, stream>>>(x, rows, cols, type, square, row_copy, column_copy);
  else
    block_cast_kernel<4><<<grid, kThreads, 0, stream>>>(x, rows, cols, type, square, row_copy, column_copy);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
