// Multi-latent attention's heads (DeepSeek-V2/V3): the per-head keys and values attention reads, built from the kv
// up-projection's output and the one RoPE key all heads share, and their gradients folded back. Elementwise copies
// moving W bf16 at a time: 8 (16-byte loads and stores) where every width, the shared key's row stride and every
// pointer allow it, as they do for DeepSeek's 128 / 64 / 128, else 1 (one thread per element moved 2 bytes and
// divided 64-bit indices per element: 7.2x and 4.9x their elementwise price on an H200, docs/ACCURACY.md). The shared
// key's gradient sums the heads in fp32 in head order at either width, so its bits do not vary run to run or with W.
#include <cstdint>
#include <initializer_list>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;
constexpr int kVectorLanes = 8;  // bf16 in 16 bytes

template <int W>
struct alignas(sizeof(bf16) * W) Lanes {
  bf16 x[W];
};
template <int W>
__device__ __forceinline__ Lanes<W> load(const bf16* p) { return *reinterpret_cast<const Lanes<W>*>(p); }
template <int W>
__device__ __forceinline__ void store(bf16* p, const Lanes<W>& lanes) { *reinterpret_cast<Lanes<W>*>(p) = lanes; }

// One thread per W elements of k's and v's rows (tokens x heads rows of nope + rope, then of v).
template <int W>
__global__ void mla_expand_kv_kernel(const bf16* kv, const bf16* k_pe, bf16* k, bf16* v, MlaHeads s) {
  const int k_elements = s.nope + s.rope, kv_elements = s.nope + s.v;
  const int nope = s.nope / W, k_width = k_elements / W, row_width = k_width + s.v / W;  // in groups of W
  const std::int64_t count = s.tokens * s.heads * row_width;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % row_width);
    const std::int64_t head_row = i / row_width;  // token * heads + head
    const std::int64_t token = head_row / s.heads;
    const bf16* kv_head = kv + head_row * kv_elements;
    if (c < nope) store<W>(k + head_row * k_elements + c * W, load<W>(kv_head + c * W));
    else if (c < k_width)
      store<W>(k + head_row * k_elements + c * W, load<W>(k_pe + token * s.k_pe_row_stride + (c - nope) * W));
    else store<W>(v + head_row * s.v + (c - k_width) * W, load<W>(kv_head + s.nope + (c - k_width) * W));
  }
}

// Groups of W elements of d_kv (tokens x heads x (nope + v)) first, then those of d_k_pe (tokens x rope).
template <int W>
__global__ void mla_reduce_kv_grad_kernel(const bf16* dk, const bf16* dv, bf16* d_kv, bf16* d_k_pe, MlaHeads s) {
  const int k_elements = s.nope + s.rope, kv_elements = s.nope + s.v;
  const int nope = s.nope / W, kv_width = kv_elements / W, rope = s.rope / W;
  const std::int64_t kv_count = s.tokens * s.heads * kv_width, count = kv_count + s.tokens * rope;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (i < kv_count) {
      const int c = static_cast<int>(i % kv_width);
      const std::int64_t head_row = i / kv_width;
      store<W>(d_kv + head_row * kv_elements + c * W, c < nope ? load<W>(dk + head_row * k_elements + c * W)
                                                             : load<W>(dv + head_row * s.v + (c - nope) * W));
      continue;
    }
    const std::int64_t j = i - kv_count, token = j / rope;
    const int c = static_cast<int>(j % rope);
    float sum[W] = {};
    for (int head = 0; head < s.heads; ++head) {
      const Lanes<W> g = load<W>(dk + (token * s.heads + head) * k_elements + s.nope + c * W);
      for (int w = 0; w < W; ++w) sum[w] += to_float(g.x[w]);
    }
    Lanes<W> out;
    for (int w = 0; w < W; ++w) out.x[w] = to_bf16(sum[w]);
    store<W>(d_k_pe + token * s.k_pe_row_stride + c * W, out);
  }
}

void require_shape(const MlaHeads& s) {
  detail::require(s.tokens > 0 && s.heads > 0 && s.nope >= 0 && s.rope > 0 && s.v > 0,
                  "mla heads: tokens, heads, a RoPE part and a value width are required");
  detail::require(s.k_pe_row_stride >= s.rope, "mla heads: k_pe's rows must hold its rope elements");
}

// Whether every row width, the shared key's stride and every pointer let 16 bytes move at once.
bool vectorisable(const MlaHeads& s, std::initializer_list<const void*> pointers) {
  for (const std::int64_t width : {std::int64_t{s.nope}, std::int64_t{s.rope}, std::int64_t{s.v}, s.k_pe_row_stride})
    if (width % kVectorLanes) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % (sizeof(bf16) * kVectorLanes)) return false;
  return true;
}

}  // namespace

void mla_expand_kv(const bf16* kv, const bf16* k_pe, bf16* k, bf16* v, const MlaHeads& shape, cudaStream_t stream) {
  require_shape(shape);
  const std::int64_t elements = shape.tokens * shape.heads * (shape.nope + shape.rope + shape.v);
  if (vectorisable(shape, {kv, k_pe, k, v}))
    mla_expand_kv_kernel<kVectorLanes><<<detail::grid_for(elements / kVectorLanes, kThreads), kThreads, 0, stream>>>(
        kv, k_pe, k, v, shape);
  else
    mla_expand_kv_kernel<1><<<detail::grid_for(elements, kThreads), kThreads, 0, stream>>>(kv, k_pe, k, v, shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

void mla_reduce_kv_grad(const bf16* dk, const bf16* dv, bf16* d_kv, bf16* d_k_pe, const MlaHeads& shape,
                        cudaStream_t stream) {
  require_shape(shape);
  const std::int64_t elements = shape.tokens * (shape.heads * (shape.nope + shape.v) + shape.rope);
  if (vectorisable(shape, {dk, dv, d_kv, d_k_pe}))
    mla_reduce_kv_grad_kernel<kVectorLanes><<<detail::grid_for(elements / kVectorLanes, kThreads), kThreads, 0,
                                              stream>>>(dk, dv, d_kv, d_k_pe, shape);
  else
    mla_reduce_kv_grad_kernel<1><<<detail::grid_for(elements, kThreads), kThreads, 0, stream>>>(dk, dv, d_kv, d_k_pe,
                                                                                               shape);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
