// Attention sinks around any backend's plain attention (gpu/kernels.hpp states the identity they rest on): the
// forward folds each head's sink into a row's log-sum-exp and rescales the row's output; the backward sums the sink's
// gradient over rows, per block of tokens into partials, then over the blocks in order, so its bits never vary.
#include <cmath>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;
// Eight lanes share a row (a token's head, v_head_dim wide), each moving 16-byte pieces where the row allows: a warp
// works on four rows at once, each a contiguous 128 bytes at gpt-oss's head dim 64 (one lane a row was latency-bound:
// 170 us a call on one H200 at 8,192 tokens x 64 heads, 2026-12-02, against 45 us of its bytes).
constexpr int kLanesPerRow = 8, kGroups = kThreads / kLanesPerRow;
constexpr int kTokensPerBlock = 4 * kGroups;  // the backward's rows of one head per block: four per group

void check(const AttentionSinkShape& s) {
  detail::require(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.v_head_dim > 0,
                  "attention sinks: positive batch, seq, heads and v_head_dim are required");
}

std::int64_t token_blocks(const AttentionSinkShape& s) { return (s.batch * s.seq + kTokensPerBlock - 1) / kTokensPerBlock; }

// lse's index of `token`'s row of head `h`: [batch, heads, seq].
__device__ __forceinline__ std::int64_t lse_index(std::int64_t token, int h, const AttentionSinkShape& s) {
  return (token / s.seq * s.heads + h) * s.seq + token % s.seq;
}

// This lane's share of a row's elements scaled in place: 16-byte pieces (kVector: v_head_dim a multiple of 8 and the
// row 16-byte aligned) or single elements, each lane every eighth.
template <bool kVector>
__device__ __forceinline__ void scale_row(bf16* row, int width, int sub, float scale) {
  if constexpr (kVector) {
    for (int c = sub * 8; c < width; c += 8 * kLanesPerRow) {
      detail::Float8 x = detail::load8(row, c);
      for (float& v : x.v) v *= scale;
      detail::store8(row, c, x);
    }
  } else {
    for (int d = sub; d < width; d += kLanesPerRow) row[d] = to_bf16(to_float(row[d]) * scale);
  }
}

// This lane's share of rowsum(a b) over a row, summed over its group of eight lanes (every lane gets it).
template <bool kVector>
__device__ __forceinline__ float group_dot(const bf16* a, const bf16* b, int width, int sub, bool live) {
  float dot = 0;
  if (live) {
    if constexpr (kVector) {
      for (int c = sub * 8; c < width; c += 8 * kLanesPerRow) {
        const detail::Float8 x = detail::load8(a, c), y = detail::load8(b, c);
        for (int i = 0; i < 8; ++i) dot += x.v[i] * y.v[i];
      }
    } else {
      for (int d = sub; d < width; d += kLanesPerRow) dot += to_float(a[d]) * to_float(b[d]);
    }
  }
  for (int offset = kLanesPerRow / 2; offset > 0; offset >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  return dot;
}

template <bool kVector>
__global__ void sinks_forward_kernel(bf16* o, float* lse, const bf16* sinks, AttentionSinkShape s) {
  const std::int64_t thread = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t row = thread / kLanesPerRow, rows = s.batch * s.seq * s.heads;
  const int sub = static_cast<int>(thread % kLanesPerRow);
  const bool live = row < rows;
  const int h = live ? static_cast<int>(row % s.heads) : 0;
  float* l = live ? lse + lse_index(row / s.heads, h, s) : nullptr;
  const float before = live ? *l : 0.f;
  __syncwarp();  // every lane of a row has read its lse before the row's first lane writes it
  if (!live) return;
  const float sink = to_float(sinks[h]);
  // log(exp(before) + exp(sink)) without overflow; a row of no keys (before = -inf) becomes the sink alone.
  const float after = fmaxf(before, sink) + log1pf(expf(-fabsf(before - sink)));
  scale_row<kVector>(o + row * s.v_head_dim, s.v_head_dim, sub, expf(before - after));
  if (sub == 0) *l = after;
}

// Block (chunk, head): sum over its tokens of exp(sink - lse') rowsum(dO O'), a group of eight lanes per token, the
// same four tokens per group in every block (a fixed order: the same bits every run).
template <bool kVector>
__global__ void sinks_backward_partial_kernel(const bf16* o, const bf16* dout, const float* lse, const bf16* sinks,
                                              float* partials, AttentionSinkShape s) {
  __shared__ float scratch[32];
  const int group = threadIdx.x / kLanesPerRow, sub = threadIdx.x % kLanesPerRow, h = blockIdx.y;
  const std::int64_t tokens = s.batch * s.seq, first = blockIdx.x * static_cast<std::int64_t>(kTokensPerBlock);
  const float sink = to_float(sinks[h]);
  float sum = 0;
#pragma unroll
  for (int i = 0; i < kTokensPerBlock / kGroups; ++i) {
    const std::int64_t token = first + group + i * kGroups;
    const bool live = token < tokens;  // every lane shuffles: the group's sum needs the whole warp
    const std::int64_t base = (token * s.heads + h) * s.v_head_dim;
    const float dot = group_dot<kVector>(o + base, dout + base, s.v_head_dim, sub, live);
    if (live && sub == 0) sum += expf(sink - lse[lse_index(token, h, s)]) * dot;
  }
  const float total = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[h * static_cast<std::int64_t>(gridDim.x) + blockIdx.x] = total;
}

__global__ void sinks_backward_finish_kernel(const float* partials, std::int64_t blocks, int heads, bf16* d_sinks,
                                             bool accumulate) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= heads) return;
  float sum = 0;
  for (std::int64_t b = 0; b < blocks; ++b) sum += partials[h * blocks + b];
  d_sinks[h] = to_bf16((accumulate ? to_float(d_sinks[h]) : 0.f) - sum);
}

}  // namespace

void attention_sinks_forward(bf16* o, float* lse, const bf16* sinks, const AttentionSinkShape& shape,
                             cudaStream_t stream) {
  check(shape);
  const std::int64_t blocks = (shape.batch * shape.seq * shape.heads * kLanesPerRow + kThreads - 1) / kThreads;
  detail::require(blocks <= 0x7fffffff, "attention sinks: too many rows");
  const auto grid = static_cast<unsigned>(blocks);
  if (shape.v_head_dim % 8 == 0 && detail::aligned16(o))
    sinks_forward_kernel<true><<<grid, kThreads, 0, stream>>>(o, lse, sinks, shape);
  else
    sinks_forward_kernel<false><<<grid, kThreads, 0, stream>>>(o, lse, sinks, shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

void attention_sinks_backward(const bf16* o, const bf16* dout, const float* lse, const bf16* sinks, float* partials,
                              bf16* d_sinks, bool accumulate, const AttentionSinkShape& shape, cudaStream_t stream) {
  check(shape);
  const std::int64_t blocks = token_blocks(shape);
  detail::require(blocks <= 0x7fffffff && shape.heads <= 65535, "attention sinks: too many tokens or heads");
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(shape.heads));
  if (shape.v_head_dim % 8 == 0 && detail::aligned16(o) && detail::aligned16(dout))
    sinks_backward_partial_kernel<true><<<grid, kThreads, 0, stream>>>(o, dout, lse, sinks, partials, shape);
  else
    sinks_backward_partial_kernel<false><<<grid, kThreads, 0, stream>>>(o, dout, lse, sinks, partials, shape);
  TWIN_CUDA_CHECK_LAUNCH();
  sinks_backward_finish_kernel<<<(shape.heads + 127) / 128, 128, 0, stream>>>(partials, blocks, shape.heads, d_sinks,
                                                                             accumulate);
  TWIN_CUDA_CHECK_LAUNCH();
}

std::size_t attention_sink_partial_floats(const AttentionSinkShape& shape) {
  check(shape);
  return static_cast<std::size_t>(token_blocks(shape) * shape.heads);
}

}  // namespace twin::kernels
