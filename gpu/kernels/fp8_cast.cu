// Current scaling in two kernels: the amax as fixed per-block maxima (no atomics: the same tensor gives the same
// record), then the cast, each block reducing those maxima itself before quantizing its 64 x 64 tile; the tile goes
// through shared memory so that both copies are written along their rows.
#include <algorithm>

#include <cuda_fp8.h>

#include "gpu/fp8_cast.hpp"
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::block_max;

constexpr int kThreads = 256;
constexpr int kTile = 64;  // a cast block's tile: 64 x 64 elements, 256 threads as 16 x 16 of 4 elements x 4 rows

__device__ __forceinline__ std::uint8_t quantize(float x, float scale, Fp8Type type) {
  const __nv_fp8_interpretation_t kind = type == Fp8Type::e4m3 ? __NV_E4M3 : __NV_E5M2;
  return __nv_cvt_float_to_fp8(x * scale, __NV_SATFINITE, kind);
}

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
      const std::uint8_t q = quantize(__bfloat162float(x[row * cols + col]), scale, type);
      rowwise[row * cols + col] = q;
      tile[r][c + j] = q;
    }
  }
  if (columnwise == nullptr) return;
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

void fp8_cast_current_scaling(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                              std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, cudaStream_t stream) {
  detail::require(rows > 0 && cols > 0, "fp8 cast: rows and cols must be positive");
  detail::require(columnwise == nullptr || (rows % 4 == 0 && cols % 4 == 0),
                  "fp8 cast: a columnwise copy needs rows and cols multiples of 4");
  detail::require(columnwise == nullptr || reinterpret_cast<std::uintptr_t>(columnwise) % 4 == 0,
                  "fp8 cast: the columnwise copy must be 4-byte aligned");
  const std::int64_t count = rows * cols;
  const int blocks = static_cast<int>(std::min<std::int64_t>(kFp8AmaxBlocks, (count + kThreads - 1) / kThreads));
  amax_kernel<<<blocks, kThreads, 0, stream>>>(x, count, detail::aligned16(x) ? count / 8 : 0, scaling + kFp8PartialsAt);
  TWIN_CUDA_CHECK_LAUNCH();
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  detail::require(grid.y <= 65535, "fp8 cast: too many rows for one launch");
  cast_kernel<<<grid, kThreads, 0, stream>>>(x, rows, cols, type, rowwise, columnwise, scaling, blocks);
  TWIN_CUDA_CHECK_LAUNCH();
}

void fill_random_fp8(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  fill_fp8_kernel<<<detail::grid_for(static_cast<std::int64_t>(count), kThreads), kThreads, 0, stream>>>(
      static_cast<std::uint8_t*>(data), count, seed);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
