// Parameter initialisation by global index (so that any sharding reproduces the unsharded weights) and
// the small conversions between fp32 and bf16 buffers that gradients and master weights need.
#include <cstdint>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;

__device__ std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Box-Muller on two 24-bit uniforms of one hash: a normal deviate per global element.
__device__ float normal_from_hash(std::uint64_t seed, std::uint64_t index) {
  const std::uint64_t z = mix(seed + 0x9E3779B97F4A7C15ull * (index + 1));
  const float u1 = (static_cast<float>(z >> 40) + 1.0f) * (1.0f / 16777217.0f);
  const float u2 = static_cast<float>((z >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

__global__ void init_normal_shard_kernel(bf16* out, ShardMap map, std::uint64_t seed, float stddev) {
  const std::int64_t count = map.local_rows * map.local_cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / map.local_cols, c = i % map.local_cols;
    out[i] = to_bf16(stddev * normal_from_hash(seed, static_cast<std::uint64_t>(seed_index(map, r, c))));
  }
}

__global__ void fill_bf16_kernel(bf16* out, std::int64_t count, float value) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(value);
}

// T: uint4 (8 bf16 per load) or bf16; rows of `cols` T-elements, strides in T-elements.
template <class T>
__global__ void copy_rows_kernel(T* dst, std::int64_t dst_ld, const T* src, std::int64_t src_ld, std::int64_t rows,
                                 std::int64_t cols) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i - r * cols;
    dst[r * dst_ld + c] = src[r * src_ld + c];
  }
}

// Eight elements per thread (a 16-byte load, two 16-byte stores) where count and both pointers allow
// (`wide`): the unfused loss's cast of the logits (core/unfused_loss.hpp) is a pass priced at full bandwidth.
__global__ void bf16_to_f32_kernel(const bf16* in, float* out, std::int64_t count, bool wide) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (wide) {
    for (std::int64_t g = first; g < count / 8; g += stride) {
      const detail::Float8 v = detail::load8(in, 8 * g);
      reinterpret_cast<float4*>(out)[2 * g] = make_float4(v.v[0], v.v[1], v.v[2], v.v[3]);
      reinterpret_cast<float4*>(out)[2 * g + 1] = make_float4(v.v[4], v.v[5], v.v[6], v.v[7]);
    }
    return;
  }
  for (std::int64_t i = first; i < count; i += stride) out[i] = to_float(in[i]);
}

__global__ void add_sum_f32_kernel(const float* values, std::int64_t count, float* total) {
  __shared__ float scratch[32];
  float sum = 0.f;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += values[i];
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) *total += sum;
}

}  // namespace

void add_sum_f32(const float* values, std::int64_t count, float* total, cudaStream_t stream) {
  add_sum_f32_kernel<<<1, 1024, 0, stream>>>(values, count, total);
  TWIN_CUDA_CHECK_LAUNCH();
}

void init_normal_shard(bf16* out, const ShardMap& map, std::uint64_t seed, float stddev, cudaStream_t stream) {
  detail::require(map.segments >= 1 && map.segments <= 3, "init_normal_shard: 1 to 3 column segments");
  const std::int64_t count = map.local_rows * map.local_cols;
  if (count == 0) return;
  init_normal_shard_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(out, map, seed, stddev);
  TWIN_CUDA_CHECK_LAUNCH();
}

void fill_bf16(bf16* out, std::int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  fill_bf16_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(out, count, value);
  TWIN_CUDA_CHECK_LAUNCH();
}

void copy_bf16_rows(bf16* dst, std::int64_t dst_ld, const bf16* src, std::int64_t src_ld, std::int64_t rows,
                    std::int64_t cols, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  constexpr std::int64_t kVector = 8;  // bf16 per 16-byte load
  const bool vectors = reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                       dst_ld % kVector == 0 && src_ld % kVector == 0 && cols % kVector == 0;
  if (vectors) {
    const std::int64_t count = rows * (cols / kVector);
    copy_rows_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<uint4*>(dst), dst_ld / kVector, reinterpret_cast<const uint4*>(src), src_ld / kVector, rows,
        cols / kVector);
  } else {
    copy_rows_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(dst, dst_ld, src, src_ld, rows,
                                                                                       cols);
  }
  TWIN_CUDA_CHECK_LAUNCH();
}

void bf16_to_f32(const bf16* in, float* out, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  const bool wide = count % 8 == 0 && detail::aligned16(in) && detail::aligned16(out);
  bf16_to_f32_kernel<<<detail::grid_for(wide ? count / 8 : count, kThreads), kThreads, 0, stream>>>(in, out, count,
                                                                                                      wide);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
