// Delayed scaling in one kernel: each block takes the scale from the tensor's amax ring (the casts before this one),
// quantizes its 64 x 64 tile (gpu/kernels/fp8_tile.cuh) and folds the tile's amax into this cast's ring slot with an
// atomic max. A max is exact in any order, so the slot, and every later scale, is the same run after run. The ring
// keeps history_len + 2 slots so that no block reads a slot another writes: this cast's (written), the next cast's
// (cleared by block 0, holding the amax of history_len + 1 casts ago) and the history_len read.
#include "gpu/fp8_cast.hpp"
#include "gpu/kernels/common.cuh"
#include "gpu/kernels/fp8_tile.cuh"

namespace twin::kernels {
namespace {

using detail::kCastThreads;
using detail::kTile;

__global__ void reset_kernel(float* state, int floats) {
  for (int i = threadIdx.x; i < floats; i += blockDim.x) state[i] = i == 0 ? 1.0f : 0.0f;
}

__global__ void delayed_cast_kernel(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                                    std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, float* state,
                                    int ring, int slot) {
  __shared__ float scratch[32];
  __shared__ float block_scale;
  __shared__ std::uint8_t tile[kTile][kTile + 4];
  float* amaxes = state + kFp8DelayedRingAt;
  const int next = (slot + 1) % ring;
  if (threadIdx.x < 32) {
    float history = 0.0f;  // the largest amax of the last history_len casts (Transformer Engine's "max")
    for (int i = threadIdx.x; i < ring; i += 32)
      if (i != slot && i != next) history = fmaxf(history, amaxes[i]);
    history = detail::warp_max(history);
    if (threadIdx.x == 0) {
      // An empty, all-zero or non-finite history keeps the scale before (1 at first), as Transformer Engine's update.
      const bool usable = history > 0.0f && history <= 3.4e38f;
      const float scale = usable ? fp8_max(type) / history : state[0];
      block_scale = scale;
      if (blockIdx.x == 0 && blockIdx.y == 0) {
        scaling[0] = 1.0f / scale;
        if (usable) state[0] = scale;  // no block reads state[0] when the history is usable
        amaxes[next] = 0.0f;
      }
    }
  }
  __syncthreads();
  const float local = detail::quantize_tile<true>(x, rows, cols, type, block_scale, rowwise, columnwise, tile);
  const float block = detail::block_max(local, scratch);
  // Non-negative floats order as their bit patterns do, so an integer atomic max is the float max.
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amaxes + slot), __float_as_int(block));
}

}  // namespace

void fp8_delayed_state_reset(float* state, int history_len, cudaStream_t stream) {
  detail::require(history_len >= 1, "fp8 delayed scaling: amax_history_len must be at least 1");
  reset_kernel<<<1, 128, 0, stream>>>(state, fp8_delayed_state_floats(history_len));
  TWIN_CUDA_CHECK_LAUNCH();
}

void fp8_cast_delayed_scaling(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                              std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, float* state,
                              int history_len, std::int64_t cast_index, cudaStream_t stream) {
  detail::require(history_len >= 1 && cast_index >= 0, "fp8 delayed scaling: history_len >= 1, cast_index >= 0");
  const dim3 grid = detail::cast_grid(rows, cols, columnwise);
  const int ring = history_len + 2;
  delayed_cast_kernel<<<grid, kCastThreads, 0, stream>>>(x, rows, cols, type, rowwise, columnwise, scaling, state, ring,
                                                        static_cast<int>(cast_index % ring));
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
