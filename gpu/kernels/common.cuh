// Helpers shared by the kernel files: launch checks, block-wide reductions and grid sizing.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::kernels::detail {

inline void require(bool condition, const char* what) {
  if (!condition) throw std::invalid_argument(std::string("twin kernel: ") + what);
}

// A grid-stride launch of `count` elements: enough blocks to fill the GPU several times, no more.
inline unsigned grid_for(std::int64_t count, int threads) {
  const std::int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 floats; the call ends with a barrier so scratch can be reused at once.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.f;
  total = warp_sum(total);
  __syncthreads();
  return total;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : -INFINITY;
  total = warp_max(total);
  __syncthreads();
  return total;
}

__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }  // a gradient kept in fp32 (GradRef's f32)
__device__ __forceinline__ bf16 to_bf16(float x) { return __float2bfloat16(x); }
// An fp32 sum stored as a gradient element of type G (bf16 or fp32: GradRef's types).
template <typename G>
__device__ __forceinline__ G from_float(float x);
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float x) { return __float2bfloat16(x); }
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }

// Eight bf16 as one 16-byte access, as floats: vector kernels move memory in wider pieces where shapes and
// pointers allow (aligned16), doing each element's arithmetic as the scalar ones do.
struct Float8 {
  float v[8];
};
// Eight bf16 already in a register (a 16-byte load kept for later) as floats.
__device__ __forceinline__ Float8 unpack8(uint4 bits) {
  Float8 out;
  const unsigned words[4] = {bits.x, bits.y, bits.z, bits.w};
  for (int w = 0; w < 4; ++w) {
    const float2 pair = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[w]));
    out.v[2 * w] = pair.x;
    out.v[2 * w + 1] = pair.y;
  }
  return out;
}
// Eight fp32 as two 16-byte accesses (a gradient kept in fp32; `i` a multiple of 8, the pointer 16-byte aligned).
__device__ __forceinline__ Float8 load8(const float* p, std::int64_t i) {
  const float4 lo = *reinterpret_cast<const float4*>(p + i), hi = *reinterpret_cast<const float4*>(p + i + 4);
  return Float8{{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
}
__device__ __forceinline__ void store8(float* p, std::int64_t i, const Float8& x) {
  *reinterpret_cast<float4*>(p + i) = make_float4(x.v[0], x.v[1], x.v[2], x.v[3]);
  *reinterpret_cast<float4*>(p + i + 4) = make_float4(x.v[4], x.v[5], x.v[6], x.v[7]);
}
__device__ __forceinline__ Float8 load8(const bf16* p, std::int64_t i) {
  return unpack8(*reinterpret_cast<const uint4*>(p + i));
}
__device__ __forceinline__ void store8(bf16* p, std::int64_t i, const Float8& x) {
  unsigned words[4];
  for (int w = 0; w < 4; ++w) {
    const __nv_bfloat162 pair = __halves2bfloat162(to_bf16(x.v[2 * w]), to_bf16(x.v[2 * w + 1]));
    words[w] = *reinterpret_cast<const unsigned*>(&pair);
  }
  *reinterpret_cast<uint4*>(p + i) = make_uint4(words[0], words[1], words[2], words[3]);
}

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace twin::kernels::detail
