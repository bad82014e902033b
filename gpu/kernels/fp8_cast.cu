// Current scaling in two kernels: the amax as fixed per-block maxima (no atomics: the same tensor gives the same
// record), then the cast, each block reducing those maxima itself before quantizing its 64 x 64 tile
// (gpu/kernels/fp8_tile.cuh).
#include <algorithm>
#include <limits>

#include "gpu/fp8_cast.hpp"
#include "gpu/kernels/common.cuh"
#include "gpu/kernels/fp8_tile.cuh"

namespace twin::kernels {
namespace {

using detail::block_max;
using detail::cast_grid;
using detail::kCastThreads;
using detail::kTile;
using detail::quantize_tile;

constexpr int kThreads = kCastThreads;

// `vectors`: the leading groups of 8 elements read as 16-byte loads (0 when x is not 16-byte aligned).
__global__ void amax_kernel(const __nv_bfloat16* x, std::int64_t count, std::int64_t vectors, float* partials) {
  __shared__ float scratch[32];
  float local = 0.0f;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::int64_t v = first; v < vectors; v += stride) {
    const detail::Float8 f = detail::load8(x, v * 8);
    for (float e : f.v) local = fmaxf(local, fabsf(e));
  }
  for (std::int64_t i = vectors * 8 + first; i < count; i += stride) local = fmaxf(local, fabsf(__bfloat162float(x[i])));
  const float block = block_max(local, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = block;
}

__global__ void cast_kernel(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                            std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, int partial_count) {
  __shared__ float scratch[32];
  __shared__ std::uint8_t tile[kTile][kTile + 4];
  float local = 0.0f;
  for (int i = threadIdx.x; i < partial_count; i += kThreads) local = fmaxf(local, scaling[kFp8PartialsAt + i]);
  const float amax = block_max(local, scratch);
  const float scale = fp8_scale_for(amax, type);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    scaling[0] = 1.0f / scale;
    scaling[1] = amax;
  }
  quantize_tile<false>(x, rows, cols, type, scale, rowwise, columnwise, tile);
}

// A 64 x 64 tile through shared memory: reads along the input's rows, writes along the output's.
__global__ void transpose_kernel(const std::uint8_t* in, std::int64_t rows, std::int64_t cols, std::uint8_t* out) {
  __shared__ std::uint8_t tile[kTile][kTile + 1];
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile, col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
    const int r = i / kTile, c = i % kTile;
    if (row0 + r < rows && col0 + c < cols) tile[r][c] = in[(row0 + r) * cols + col0 + c];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
    const int c = i / kTile, r = i % kTile;
    if (row0 + r < rows && col0 + c < cols) out[(col0 + c) * rows + row0 + r] = tile[r][c];
  }
}

__global__ void fill_fp8_kernel(std::uint8_t* data, std::size_t count, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f;
    data[i] = __nv_cvt_float_to_fp8(u, __NV_SATFINITE, __NV_E4M3);
  }
}

}  // namespace

int fp8_amax_partial_count(std::int64_t count) {
  return static_cast<int>(std::min<std::int64_t>(kFp8AmaxBlocks, (count + kThreads - 1) / kThreads));
}

void fp8_amax_partials(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, float* scaling,
                       cudaStream_t stream) {
  const std::int64_t count = rows * cols;
  amax_kernel<<<fp8_amax_partial_count(count), kThreads, 0, stream>>>(x, count, detail::aligned16(x) ? count / 8 : 0,
                                                                       scaling + kFp8PartialsAt);
  TWIN_CUDA_CHECK_LAUNCH();
}

void fp8_cast_from_amax_partials(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                                 std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, cudaStream_t stream) {
  const dim3 grid = cast_grid(rows, cols, columnwise);
  cast_kernel<<<grid, kThreads, 0, stream>>>(x, rows, cols, type, rowwise, columnwise, scaling,
                                             fp8_amax_partial_count(rows * cols));
  TWIN_CUDA_CHECK_LAUNCH();
}

void fp8_cast_current_scaling(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                              std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, cudaStream_t stream) {
  fp8_amax_partials(x, rows, cols, scaling, stream);
  fp8_cast_from_amax_partials(x, rows, cols, type, rowwise, columnwise, scaling, stream);
}

void fp8_transpose(const std::uint8_t* rowwise, std::int64_t rows, std::int64_t cols, std::uint8_t* transposed,
                   cudaStream_t stream) {
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  detail::require(rows > 0 && cols > 0, "fp8 transpose: rows and cols must be positive");
  detail::require(row_tiles <= 65535 && col_tiles <= std::numeric_limits<int>::max(),
                  "fp8 transpose: too many rows for one launch");
  transpose_kernel<<<dim3(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles)), kThreads, 0, stream>>>(
      rowwise, rows, cols, transposed);
  TWIN_CUDA_CHECK_LAUNCH();
}

void fill_random_fp8(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  fill_fp8_kernel<<<detail::grid_for(static_cast<std::int64_t>(count), kThreads), kThreads, 0, stream>>>(
      static_cast<std::uint8_t*>(data), count, seed);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
