// Context parallelism's ring attention: merging a block's output into the running output by the two blocks'
// log-sum-exps, and the fp32 accumulators of the ring's gradients.
#include "gpu/kernels.hpp"

#include <cmath>
#include <cstdint>

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
// softmax over the union of the two key sets, from each set's normalised output and log-sum-exp. Four consecutive
// elements of one (row, head) per thread (head_dim % 4 == 0): 16-byte loads of the fp32 output, 8-byte of the block.
__global__ void merge_output_kernel(float* o_acc, const float* lse_acc, const bf16* o_block, const float* lse_block,
                                    AttentionMergeShape s) {
  const int quads = s.head_dim / 4;
  const std::int64_t count = s.batch * s.rows * s.heads * quads;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int quad = static_cast<int>(i % quads);
    const int head = static_cast<int>((i / quads) % s.heads);
    const std::int64_t row = (i / (static_cast<std::int64_t>(quads) * s.heads)) % s.rows;
    const std::int64_t b = i / (static_cast<std::int64_t>(quads) * s.heads * s.rows);
    const std::int64_t at = stats_index(s, b, row, head);
    const float a = lse_acc[at], c = lse_block[at];
    const float top = fmaxf(a, c);
    const float wa = expf(a - top), wc = expf(c - top), norm = 1.0f / (wa + wc);
    const std::int64_t element =
        ((b * s.seq + s.first_row + row) * s.heads + head) * static_cast<std::int64_t>(s.head_dim) + 4 * quad;
    float4 acc = *reinterpret_cast<const float4*>(o_acc + element);
    const uint2 bits = *reinterpret_cast<const uint2*>(o_block + element);
    const bf16* block = reinterpret_cast<const bf16*>(&bits);
    acc.x = (acc.x * wa + to_float(block[0]) * wc) * norm;
    acc.y = (acc.y * wa + to_float(block[1]) * wc) * norm;
    acc.z = (acc.z * wa + to_float(block[2]) * wc) * norm;
    acc.w = (acc.w * wa + to_float(block[3]) * wc) * norm;
    *reinterpret_cast<float4*>(o_acc + element) = acc;
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

// Four consecutive columns per thread (cols and strides multiples of 4, rows aligned): 16-byte fp32, 8-byte bf16.
__global__ void add_bf16_rows_to_f32_kernel(float* acc, const bf16* x, std::int64_t rows, std::int64_t cols,
                                            std::int64_t x_row_stride) {
  const std::int64_t quads = rows * cols / 4;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < quads;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t element = 4 * i, row = element / cols, col = element % cols;
    float4 sum = *reinterpret_cast<const float4*>(acc + element);
    const uint2 bits = *reinterpret_cast<const uint2*>(x + row * x_row_stride + col);
    const bf16* v = reinterpret_cast<const bf16*>(&bits);
    sum.x += to_float(v[0]), sum.y += to_float(v[1]), sum.z += to_float(v[2]), sum.w += to_float(v[3]);
    *reinterpret_cast<float4*>(acc + element) = sum;
  }
}

__global__ void f32_to_bf16_rows_kernel(const float* in, bf16* out, std::int64_t rows, std::int64_t cols,
                                        std::int64_t out_row_stride) {
  const std::int64_t quads = rows * cols / 4;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < quads;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t element = 4 * i, row = element / cols, col = element % cols;
    const float4 v = *reinterpret_cast<const float4*>(in + element);
    bf16 packed[4] = {to_bf16(v.x), to_bf16(v.y), to_bf16(v.z), to_bf16(v.w)};
    *reinterpret_cast<uint2*>(out + row * out_row_stride + col) = *reinterpret_cast<const uint2*>(packed);
  }
}

// The row layouts the two kernels above take: whole quads per row, every row 8-byte aligned.
void require_quads(const float* f32, const bf16* rows, std::int64_t cols, std::int64_t row_stride, const char* what) {
  detail::require(cols % 4 == 0 && row_stride % 4 == 0 && detail::aligned16(f32) &&
                      reinterpret_cast<std::uintptr_t>(rows) % 8 == 0,
                  what);
}

}  // namespace

void attention_merge(float* o_acc, float* lse_acc, const bf16* o_block, const float* lse_block,
                     const AttentionMergeShape& shape, cudaStream_t stream) {
  detail::require(shape.batch > 0 && shape.heads > 0 && shape.head_dim > 0 && shape.rows > 0 &&
                      shape.first_row >= 0 && shape.first_row + shape.rows <= shape.seq,
                  "attention_merge: the block's rows must lie within each sequence");
  detail::require(shape.head_dim % 4 == 0 && detail::aligned16(o_acc) && reinterpret_cast<std::uintptr_t>(o_block) % 8 == 0,
                  "attention_merge: head_dim a multiple of 4, the outputs aligned");
  const std::int64_t quads = shape.batch * shape.rows * shape.heads * (shape.head_dim / 4);
  // The output first: it reads both statistics before the second kernel overwrites the running one.
  merge_output_kernel<<<detail::grid_for(quads, kThreads), kThreads, 0, stream>>>(o_acc, lse_acc, o_block, lse_block,
                                                                                   shape);
  TWIN_CUDA_CHECK_LAUNCH();
  merge_stats_kernel<<<detail::grid_for(shape.batch * shape.heads * shape.rows, kThreads), kThreads, 0, stream>>>(
      lse_acc, lse_block, shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

void add_bf16_rows_to_f32(float* acc, const bf16* x, std::int64_t rows, std::int64_t cols, std::int64_t x_row_stride,
                          cudaStream_t stream) {
  detail::require(x_row_stride >= cols, "add_bf16_rows_to_f32: rows overlap");
  require_quads(acc, x, cols, x_row_stride, "add_bf16_rows_to_f32: columns and stride multiples of 4, aligned");
  if (rows * cols == 0) return;
  add_bf16_rows_to_f32_kernel<<<detail::grid_for(rows * cols / 4, kThreads), kThreads, 0, stream>>>(acc, x, rows, cols,
                                                                                                   x_row_stride);
  TWIN_CUDA_CHECK_LAUNCH();
}

void f32_to_bf16_rows(const float* in, bf16* out, std::int64_t rows, std::int64_t cols, std::int64_t out_row_stride,
                      cudaStream_t stream) {
  detail::require(out_row_stride >= cols, "f32_to_bf16_rows: rows overlap");
  require_quads(in, out, cols, out_row_stride, "f32_to_bf16_rows: columns and stride multiples of 4, aligned");
  if (rows * cols == 0) return;
  f32_to_bf16_rows_kernel<<<detail::grid_for(rows * cols / 4, kThreads), kThreads, 0, stream>>>(in, out, rows, cols,
                                                                                               out_row_stride);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
