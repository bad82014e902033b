// Context parallelism's ring attention: merging a block's output into the running output by the two blocks'
// log-sum-exps, and the fp32 accumulators of the ring's gradients.
#include "gpu/kernels.hpp"

#include <cmath>

#include "gpu/checks.hpp"
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;

// The block's rows of sequence `b`, row `r` of the block, head `h`: their index in [batch, heads, seq] stats.
__device__ __forceinline__ std::int64_t stats_index(const AttentionMergeShape& s, std::int64_t b, std::int64_t row,
                                                    int head) {
  return (b * s.heads + head) * s.seq + s.first_row + row;
}

// o_acc = o_acc * exp(lse_acc - lse) + o_block * exp(lse_block - lse), lse = log(exp(lse_acc) + exp(lse_block)):
// softmax over the union of the two key sets, from each set's normalised output and log-sum-exp.
__global__ void merge_output_kernel(float* o_acc, const float* lse_acc, const bf16* o_block, const float* lse_block,
                                    AttentionMergeShape s) {
  const std::int64_t count = s.batch * s.rows * s.heads * s.head_dim;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int head = static_cast<int>((i / s.head_dim) % s.heads);
    const std::int64_t row = (i / (static_cast<std::int64_t>(s.head_dim) * s.heads)) % s.rows;
    const std::int64_t b = i / (static_cast<std::int64_t>(s.head_dim) * s.heads * s.rows);
    const std::int64_t at = stats_index(s, b, row, head);
    const float a = lse_acc[at], c = lse_block[at];
    const float top = fmaxf(a, c);
    const float wa = expf(a - top), wc = expf(c - top);
    const std::int64_t element =
        ((b * s.seq + s.first_row + row) * s.heads + head) * static_cast<std::int64_t>(s.head_dim) + i % s.head_dim;
    o_acc[element] = (o_acc[element] * wa + to_float(o_block[element]) * wc) / (wa + wc);
  }
}

__global__ void merge_stats_kernel(float* lse_acc, const float* lse_block, AttentionMergeShape s) {
  const std::int64_t count = s.batch * s.heads * s.rows;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i % s.rows;
    const int head = static_cast<int>((i / s.rows) % s.heads);
    const std::int64_t b = i / (s.rows * s.heads);
    const std::int64_t at = stats_index(s, b, row, head);
    const float a = lse_acc[at], c = lse_block[at];
    const float top = fmaxf(a, c);
    lse_acc[at] = top + logf(expf(a - top) + expf(c - top));
  }
}

__global__ void add_bf16_rows_to_f32_kernel(float* acc, const bf16* x, std::int64_t rows, std::int64_t cols,
                                            std::int64_t x_row_stride) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    acc[i] += to_float(x[(i / cols) * x_row_stride + i % cols]);
}

__global__ void f32_to_bf16_rows_kernel(const float* in, bf16* out, std::int64_t rows, std::int64_t cols,
                                        std::int64_t out_row_stride) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[(i / cols) * out_row_stride + i % cols] = to_bf16(in[i]);
}

}  // namespace

void attention_merge(float* o_acc, float* lse_acc, const bf16* o_block, const float* lse_block,
                     const AttentionMergeShape& shape, cudaStream_t stream) {
  detail::require(shape.batch > 0 && shape.heads > 0 && shape.head_dim > 0 && shape.rows > 0 &&
                      shape.first_row >= 0 && shape.first_row + shape.rows <= shape.seq,
                  "attention_merge: the block's rows must lie within each sequence");
  const std::int64_t elements = shape.batch * shape.rows * shape.heads * shape.head_dim;
  // The output first: it reads both statistics before the second kernel overwrites the running one.
  merge_output_kernel<<<detail::grid_for(elements, kThreads), kThreads, 0, stream>>>(o_acc, lse_acc, o_block,
                                                                                      lse_block, shape);
  TWIN_CUDA_CHECK_LAUNCH();
  merge_stats_kernel<<<detail::grid_for(shape.batch * shape.heads * shape.rows, kThreads), kThreads, 0, stream>>>(
      lse_acc, lse_block, shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

void add_bf16_rows_to_f32(float* acc, const bf16* x, std::int64_t rows, std::int64_t cols, std::int64_t x_row_stride,
                          cudaStream_t stream) {
  detail::require(x_row_stride >= cols, "add_bf16_rows_to_f32: rows overlap");
  if (rows * cols == 0) return;
  add_bf16_rows_to_f32_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(acc, x, rows, cols,
                                                                                               x_row_stride);
  TWIN_CUDA_CHECK_LAUNCH();
}

void f32_to_bf16_rows(const float* in, bf16* out, std::int64_t rows, std::int64_t cols, std::int64_t out_row_stride,
                      cudaStream_t stream) {
  detail::require(out_row_stride >= cols, "f32_to_bf16_rows: rows overlap");
  if (rows * cols == 0) return;
  f32_to_bf16_rows_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, out, rows, cols,
                                                                                           out_row_stride);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
