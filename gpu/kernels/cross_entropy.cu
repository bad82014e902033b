// Softmax cross-entropy over a vocabulary shard, one block per row. Forward is one pass over the logits:
// each thread keeps a running (max, sum of exp(logit - max)) pair, rescaling its sum when the max grows
// (the online softmax), and the block merges the pairs. Shards merge the same way: after the all-reduce
// of the max, each shard rescales its sum to the global max before the sums are added. Exponentials are
// of (logit - max), so they never overflow. Rows of a shard whose width is a multiple of eight, at
// 16-byte aligned addresses, move eight bf16 per access. Soft-capped logits (Gemma-2's final_logit_softcapping,
// cap x tanh(logit / cap)) are capped as they are read, in both passes: the backward recomputes the tanh rather than
// the forward writing the capped logits, so the bytes moved stay those of the plain loss.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::aligned16;
using detail::Float8;
using detail::load8;
using detail::store8;
using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 512;

// A partial softmax denominator: sum of exp(x - max) over the elements seen; max = -inf when none.
struct MaxSum {
  float max = -INFINITY, sum = 0.f;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset), __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = merge(v, other);
  }
  return v;
}

// Every thread gets the block's pair; `scratch` holds 32 pairs.
__device__ __forceinline__ MaxSum block_merge(MaxSum v, MaxSum* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_merge(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = warp_merge(lane < warps ? scratch[lane] : MaxSum{});
  __syncthreads();
  return v;
}

// exp(x - m) as 2^(x log2 e - m log2 e): one fused multiply-add before the hardware's base-2 exponential, so
// the pass stays close to the memory rate.
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float exp_minus(float x, float m) { return exp2f(fmaf(x, kLog2e, -m * kLog2e)); }

// The logit the softmax sees: as stored, or soft-capped.
template <bool kCapped>
__device__ __forceinline__ float capped(float x, float cap) {
  if constexpr (kCapped) return cap * tanhf(x / cap);
  return x;
}

template <bool kVector, bool kCapped>
__global__ void local_stats_kernel(const bf16* logits, const std::int32_t* targets, float* row_max, float* sum_exp,
                                   float* target_logit, std::int64_t vocab, std::int64_t vocab_start, float cap) {
  __shared__ MaxSum scratch[32];
  const std::int64_t row = blockIdx.x * vocab;
  MaxSum mine;
  if constexpr (kVector) {
    for (std::int64_t v = 8 * threadIdx.x; v < vocab; v += 8 * blockDim.x) {
      Float8 x = load8(logits, row + v);
      for (int k = 0; k < 8; ++k) x.v[k] = capped<kCapped>(x.v[k], cap);
      float m = mine.max;
      for (int k = 0; k < 8; ++k) m = fmaxf(m, x.v[k]);
      if (m == -INFINITY) continue;  // all -inf so far: nothing to add
      float s = mine.sum * exp_minus(mine.max, m);
      for (int k = 0; k < 8; ++k) s += exp_minus(x.v[k], m);
      mine = {m, s};
    }
  } else {
    for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float x = capped<kCapped>(to_float(logits[row + v]), cap);
      const float m = fmaxf(mine.max, x);
      if (m == -INFINITY) continue;
      mine = {m, mine.sum * exp_minus(mine.max, m) + exp_minus(x, m)};
    }
  }
  const MaxSum total = block_merge(mine, scratch);
  if (threadIdx.x == 0) {
    row_max[blockIdx.x] = total.max;
    sum_exp[blockIdx.x] = total.sum;
    const std::int64_t local = static_cast<std::int64_t>(targets[blockIdx.x]) - vocab_start;
    target_logit[blockIdx.x] = local >= 0 && local < vocab ? capped<kCapped>(to_float(logits[row + local]), cap) : 0.f;
  }
}

__global__ void rescale_kernel(const float* local_max, const float* global_max, float* sum_exp, std::int64_t rows) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < rows) sum_exp[r] = local_max[r] == -INFINITY ? 0.f : sum_exp[r] * expf(local_max[r] - global_max[r]);
}

__global__ void loss_kernel(const float* global_max, const float* global_sum_exp, const float* target_logit,
                            float* loss, std::int64_t rows) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < rows) loss[r] = logf(global_sum_exp[r]) + global_max[r] - target_logit[r];
}

// d logit = d capped x (1 - tanh^2) = d capped x (1 - (capped / cap)^2).
template <bool kCapped>
__device__ __forceinline__ float through_cap(float grad, float capped_logit, float cap) {
  if constexpr (kCapped) {
    const float t = capped_logit / cap;
    return grad * (1.f - t * t);
  }
  return grad;
}

template <bool kVector, bool kCapped>
__global__ void backward_kernel(const bf16* logits, const float* global_max, const float* global_sum_exp,
                                const std::int32_t* targets, bf16* dlogits, std::int64_t vocab,
                                std::int64_t vocab_start, float grad_scale, float cap) {
  const std::int64_t r = blockIdx.x, row = r * vocab;
  const float m = global_max[r];
  const float inverse_sum = 1.f / global_sum_exp[r];
  const std::int64_t target = static_cast<std::int64_t>(targets[r]) - vocab_start;
  if constexpr (kVector) {
    for (std::int64_t v = 8 * threadIdx.x; v < vocab; v += 8 * blockDim.x) {
      Float8 x = load8(logits, row + v);
      for (int k = 0; k < 8; ++k) {
        const float y = capped<kCapped>(x.v[k], cap);
        x.v[k] = through_cap<kCapped>((exp_minus(y, m) * inverse_sum - (v + k == target ? 1.f : 0.f)) * grad_scale,
                                      y, cap);
      }
      store8(dlogits, row + v, x);
    }
  } else {
    for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      const float y = capped<kCapped>(to_float(logits[row + v]), cap);
      const float p = exp_minus(y, m) * inverse_sum;
      dlogits[row + v] = to_bf16(through_cap<kCapped>((p - (v == target ? 1.f : 0.f)) * grad_scale, y, cap));
    }
  }
}

void check(std::int64_t rows, std::int64_t vocab) {
  detail::require(rows > 0 && rows <= 0x7fffffff && vocab > 0, "cross entropy: bad shape");
}

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>((rows + 255) / 256); }

template <bool kCapped>
void launch_local_stats(const bf16* logits, const std::int32_t* targets, float* row_max, float* sum_exp,
                        float* target_logit, std::int64_t rows, std::int64_t vocab_shard, std::int64_t vocab_start,
                        float cap, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(rows);
  if (vocab_shard % 8 == 0 && aligned16(logits))
    local_stats_kernel<true, kCapped><<<grid, kThreads, 0, stream>>>(logits, targets, row_max, sum_exp, target_logit,
                                                                     vocab_shard, vocab_start, cap);
  else
    local_stats_kernel<false, kCapped><<<grid, kThreads, 0, stream>>>(logits, targets, row_max, sum_exp,
                                                                      target_logit, vocab_shard, vocab_start, cap);
  TWIN_CUDA_CHECK_LAUNCH();
}

template <bool kCapped>
void launch_backward(const bf16* logits, const float* global_max, const float* global_sum_exp,
                     const std::int32_t* targets, bf16* dlogits, std::int64_t rows, std::int64_t vocab_shard,
                     std::int64_t vocab_start, float grad_scale, float cap, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(rows);
  if (vocab_shard % 8 == 0 && aligned16(logits) && aligned16(dlogits))
    backward_kernel<true, kCapped><<<grid, kThreads, 0, stream>>>(logits, global_max, global_sum_exp, targets,
                                                                  dlogits, vocab_shard, vocab_start, grad_scale, cap);
  else
    backward_kernel<false, kCapped><<<grid, kThreads, 0, stream>>>(logits, global_max, global_sum_exp, targets,
                                                                   dlogits, vocab_shard, vocab_start, grad_scale, cap);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void cross_entropy_local_stats(const bf16* logits, const std::int32_t* targets, float* row_max, float* sum_exp,
                               float* target_logit, std::int64_t rows, std::int64_t vocab_shard,
                               std::int64_t vocab_start, float softcap, cudaStream_t stream) {
  check(rows, vocab_shard);
  detail::require(softcap >= 0.f, "cross entropy: negative soft-cap");
  if (softcap > 0.f)
    launch_local_stats<true>(logits, targets, row_max, sum_exp, target_logit, rows, vocab_shard, vocab_start, softcap,
                             stream);
  else
    launch_local_stats<false>(logits, targets, row_max, sum_exp, target_logit, rows, vocab_shard, vocab_start, 0.f,
                              stream);
}

void cross_entropy_rescale_sum_exp(const float* local_max, const float* global_max, float* sum_exp, std::int64_t rows,
                                   cudaStream_t stream) {
  check(rows, 1);
  rescale_kernel<<<row_blocks(rows), 256, 0, stream>>>(local_max, global_max, sum_exp, rows);
  TWIN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_loss(const float* global_max, const float* global_sum_exp, const float* target_logit, float* loss,
                        std::int64_t rows, cudaStream_t stream) {
  check(rows, 1);
  loss_kernel<<<row_blocks(rows), 256, 0, stream>>>(global_max, global_sum_exp, target_logit, loss, rows);
  TWIN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(const bf16* logits, const float* global_max, const float* global_sum_exp,
                            const std::int32_t* targets, bf16* dlogits, std::int64_t rows, std::int64_t vocab_shard,
                            std::int64_t vocab_start, float grad_scale, float softcap, cudaStream_t stream) {
  check(rows, vocab_shard);
  detail::require(softcap >= 0.f, "cross entropy: negative soft-cap");
  if (softcap > 0.f)
    launch_backward<true>(logits, global_max, global_sum_exp, targets, dlogits, rows, vocab_shard, vocab_start,
                          grad_scale, softcap, stream);
  else
    launch_backward<false>(logits, global_max, global_sum_exp, targets, dlogits, rows, vocab_shard, vocab_start,
                           grad_scale, 0.f, stream);
}

}  // namespace twin::kernels
