// Multi-latent attention's heads (DeepSeek-V2/V3): the per-head keys and values attention reads, built from the kv
// up-projection's output and the one RoPE key all heads share, and their gradients folded back. Elementwise copies
// (one thread per output element); the shared key's gradient sums the heads in fp32 in head order, so its bits do
// not vary run to run.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;

__global__ void mla_expand_kv_kernel(const bf16* kv, const bf16* k_pe, bf16* k, bf16* v, MlaHeads s) {
  const int k_width = s.nope + s.rope, kv_width = s.nope + s.v, row_width = k_width + s.v;
  const std::int64_t count = s.tokens * s.heads * row_width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % row_width);
    const std::int64_t head_row = i / row_width;  // token * heads + head
    const std::int64_t token = head_row / s.heads;
    const bf16* kv_head = kv + head_row * kv_width;
    if (c < s.nope) k[head_row * k_width + c] = kv_head[c];
    else if (c < k_width) k[head_row * k_width + c] = k_pe[token * s.k_pe_row_stride + (c - s.nope)];
    else v[head_row * s.v + (c - k_width)] = kv_head[s.nope + (c - k_width)];
  }
}

// Elements of d_kv (tokens x heads x (nope + v)) first, then those of d_k_pe (tokens x rope).
__global__ void mla_reduce_kv_grad_kernel(const bf16* dk, const bf16* dv, bf16* d_kv, bf16* d_k_pe, MlaHeads s) {
  const int k_width = s.nope + s.rope, kv_width = s.nope + s.v;
  const std::int64_t kv_count = s.tokens * s.heads * kv_width, count = kv_count + s.tokens * s.rope;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (i < kv_count) {
      const int c = static_cast<int>(i % kv_width);
      const std::int64_t head_row = i / kv_width;
      d_kv[i] = c < s.nope ? dk[head_row * k_width + c] : dv[head_row * s.v + (c - s.nope)];
      continue;
    }
    const std::int64_t j = i - kv_count, token = j / s.rope;
    const int c = static_cast<int>(j % s.rope);
    float sum = 0.f;
    for (int head = 0; head < s.heads; ++head) sum += to_float(dk[(token * s.heads + head) * k_width + s.nope + c]);
    d_k_pe[token * s.k_pe_row_stride + c] = to_bf16(sum);
  }
}

void require_shape(const MlaHeads& s) {
  detail::require(s.tokens > 0 && s.heads > 0 && s.nope >= 0 && s.rope > 0 && s.v > 0,
                  "mla heads: tokens, heads, a RoPE part and a value width are required");
  detail::require(s.k_pe_row_stride >= s.rope, "mla heads: k_pe's rows must hold its rope elements");
}

}  // namespace

void mla_expand_kv(const bf16* kv, const bf16* k_pe, bf16* k, bf16* v, const MlaHeads& shape, cudaStream_t stream) {
  require_shape(shape);
  const std::int64_t count = shape.tokens * shape.heads * (shape.nope + shape.rope + shape.v);
  mla_expand_kv_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(kv, k_pe, k, v, shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

void mla_reduce_kv_grad(const bf16* dk, const bf16* dv, bf16* d_kv, bf16* d_k_pe, const MlaHeads& shape,
                        cudaStream_t stream) {
  require_shape(shape);
  const std::int64_t count = shape.tokens * (shape.heads * (shape.nope + shape.v) + shape.rope);
  mla_reduce_kv_grad_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(dk, dv, d_kv, d_k_pe, shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
