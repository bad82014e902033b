// Delayed scaling in one kernel: each block quantizes its 64 x 64 tile (gpu/kernels/fp8_tile.cuh) with the scale the
// state holds and folds the tile's amax into the state's running amax with an atomic max; the last block to finish
// (a ticket counter, as CUDA's threadFenceReduction sample) moves that amax into the history ring and computes the
// scale of the next cast from the ring: Transformer Engine's amax-and-scale update, fused into the cast, read by one
// block. A max is exact in any order, so the amax, and every later scale, is the same run after run. Where the amax
// is all-reduced over GPUs first (Transformer Engine's reduce_amax), the cast folds its tiles' maxima into the
// reduction's buffer instead and the update runs after the all-reduce, a warp per state (update_after_reduction).
#include "gpu/fp8_cast.hpp"
#include "gpu/kernels/common.cuh"
#include "gpu/kernels/fp8_tile.cuh"

namespace twin::kernels {
namespace {

using detail::kCastThreads;
using detail::kTile;

// The state's floats before the ring (gpu/fp8_cast.hpp): the scale, the running amax, the ticket counter.
constexpr int kScale = 0, kRunningAmax = 1, kTickets = 2;

__global__ void reset_kernel(float* state, int floats) {
  for (int i = threadIdx.x; i < floats; i += blockDim.x) state[i] = i == kScale ? 1.0f : 0.0f;
}

// The scale from the largest amax of the ring (the last history_len casts); an all-zero or non-finite history keeps
// the scale before, as TE's update does. One warp.
__device__ void scale_from_ring(float* state, int history_len, Fp8Type type) {
  const float* ring = state + kFp8DelayedRingAt;
  float history = 0.0f;  // Transformer Engine's amax_compute_algo "max"
  for (int i = threadIdx.x; i < history_len; i += 32) history = fmaxf(history, ring[i]);
  history = detail::warp_max(history);
  if (threadIdx.x == 0 && history > 0.0f && history <= 3.4e38f) state[kScale] = fp8_max(type) / history;
}

// The last block's update: this cast's amax into its ring slot, then the scale.
__device__ void update_scale(float* state, int history_len, int slot, Fp8Type type) {
  float* ring = state + kFp8DelayedRingAt;
  if (threadIdx.x == 0) {
    ring[slot] = atomicExch(state + kRunningAmax, 0.0f);
    atomicExch(reinterpret_cast<unsigned*>(state + kTickets), 0u);
  }
  __syncwarp();
  scale_from_ring(state, history_len, type);
}

// Deferred (reduced) casts mark their state with ring slot + 1 in the ticket float; 0: nothing pending.
__global__ void update_after_reduction_kernel(float* const* states, float* amaxes, int history_len, Fp8Type type) {
  float* state = states[blockIdx.x];
  auto* pending = reinterpret_cast<unsigned*>(state + kTickets);
  const unsigned slot = *pending;
  if (slot == 0) return;
  __syncwarp();
  if (threadIdx.x == 0) {
    state[kFp8DelayedRingAt + slot - 1] = amaxes[blockIdx.x];
    amaxes[blockIdx.x] = 0.0f;
    *pending = 0u;
  }
  __syncwarp();
  scale_from_ring(state, history_len, type);
}

__global__ void delayed_cast_kernel(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                                    std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, float* state,
                                    int history_len, int slot, float* reduced_amax) {
  __shared__ float scratch[32];
  __shared__ bool last;
  __shared__ std::uint8_t tile[kTile][kTile + 4];
  // Read before this block's ticket, so before the last block rewrites it.
  const float scale = state[kScale];
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    scaling[0] = 1.0f / scale;
    if (reduced_amax != nullptr) *reinterpret_cast<unsigned*>(state + kTickets) = static_cast<unsigned>(slot) + 1u;
  }
  const float local = detail::quantize_tile<true>(x, rows, cols, type, scale, rowwise, columnwise, tile);
  const float block = detail::block_max(local, scratch);
  if (reduced_amax != nullptr) {  // the update follows the amax all-reduce (fp8_delayed_update)
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(reduced_amax), __float_as_int(block));
    return;
  }
  if (threadIdx.x == 0) {
    // Non-negative floats order as their bit patterns do, so an integer atomic max is the float max.
    atomicMax(reinterpret_cast<int*>(state + kRunningAmax), __float_as_int(block));
    __threadfence();
    const unsigned blocks = gridDim.x * gridDim.y;
    last = atomicAdd(reinterpret_cast<unsigned*>(state + kTickets), 1u) == blocks - 1;
  }
  __syncthreads();
  if (last && threadIdx.x < 32) {
    __threadfence();
    update_scale(state, history_len, slot, type);
  }
}

}  // namespace

void fp8_delayed_state_reset(float* state, int history_len, cudaStream_t stream) {
  detail::require(history_len >= 1, "fp8 delayed scaling: amax_history_len must be at least 1");
  reset_kernel<<<1, 128, 0, stream>>>(state, fp8_delayed_state_floats(history_len));
  TWIN_CUDA_CHECK_LAUNCH();
}

void fp8_cast_delayed_scaling(const __nv_bfloat16* x, std::int64_t rows, std::int64_t cols, Fp8Type type,
                              std::uint8_t* rowwise, std::uint8_t* columnwise, float* scaling, float* state,
                              int history_len, std::int64_t cast_index, cudaStream_t stream, float* reduced_amax) {
  detail::require(history_len >= 1 && cast_index >= 0, "fp8 delayed scaling: history_len >= 1, cast_index >= 0");
  const dim3 grid = detail::cast_grid(rows, cols, columnwise);
  delayed_cast_kernel<<<grid, kCastThreads, 0, stream>>>(x, rows, cols, type, rowwise, columnwise, scaling, state,
                                                        history_len, static_cast<int>(cast_index % history_len),
                                                        reduced_amax);
  TWIN_CUDA_CHECK_LAUNCH();
}

void fp8_delayed_update(float* const* states, float* amaxes, int count, int history_len, Fp8Type type,
                        cudaStream_t stream) {
  detail::require(history_len >= 1 && count >= 0, "fp8 delayed update: history_len >= 1, count >= 0");
  if (count == 0) return;
  update_after_reduction_kernel<<<count, 32, 0, stream>>>(states, amaxes, history_len, type);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
