// Megatron-LM's scaled-upper-triangular masked softmax (megatron/fused_kernels, scaled_upper_triang_masked_softmax)
// over the score matrices of unfused attention, in place: a block per row, two passes over the row's kept keys (the
// first finds its maximum and sum of exponentials online, the second writes), eight columns per 16-byte access.
// Keys after the row's query are written 0 and never read.
#include <cmath>

#include "gpu/kernels/common.cuh"
#include "gpu/unfused_kernels.hpp"

namespace twin::kernels {
namespace {

using detail::Float8;
using detail::load8;
using detail::store8;

constexpr int kThreads = 128;

unsigned row_grid(std::int64_t rows) { return static_cast<unsigned>(rows < 65535 * 8 ? rows : 65535 * 8); }

__global__ void causal_softmax_forward_kernel(bf16* scores, std::int64_t rows, std::int64_t seq) {
  __shared__ float scratch[32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    bf16* x = scores + row * seq;
    const std::int64_t last = row % seq, groups = seq / 8, live = last / 8 + 1;  // keys 0..last; groups holding them
    float m = -INFINITY, sum = 0.f;
    for (std::int64_t g = threadIdx.x; g < live; g += blockDim.x) {
      const Float8 v = load8(x, 8 * g);
      for (int k = 0; k < 8; ++k) {
        if (8 * g + k > last) break;
        const float m_new = fmaxf(m, v.v[k]);
        sum = sum * expf(m - m_new) + expf(v.v[k] - m_new);
        m = m_new;
      }
    }
    const float row_max = detail::block_max(m, scratch);
    const float row_sum = detail::block_sum(m == -INFINITY ? 0.f : sum * expf(m - row_max), scratch);
    const float inverse = 1.f / row_sum;
    for (std::int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
      Float8 out{};
      if (g < live) {
        const Float8 v = load8(x, 8 * g);
        for (int k = 0; k < 8; ++k) out.v[k] = 8 * g + k <= last ? expf(v.v[k] - row_max) * inverse : 0.f;
      }
      store8(x, 8 * g, out);
    }
  }
}

// dS = P (dP - sum_j P_j dP_j) over the row's kept keys, in place over dP; 0 after the query.
__global__ void causal_softmax_backward_kernel(const bf16* probs, bf16* grad, std::int64_t rows, std::int64_t seq) {
  __shared__ float scratch[32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const bf16* p = probs + row * seq;
    bf16* d = grad + row * seq;
    const std::int64_t last = row % seq, groups = seq / 8, live = last / 8 + 1;
    float dot = 0.f;
    for (std::int64_t g = threadIdx.x; g < live; g += blockDim.x) {
      const Float8 pv = load8(p, 8 * g), dv = load8(d, 8 * g);
      for (int k = 0; k < 8; ++k)
        if (8 * g + k <= last) dot += pv.v[k] * dv.v[k];
    }
    dot = detail::block_sum(dot, scratch);
    for (std::int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
      Float8 out{};
      if (g < live) {
        const Float8 pv = load8(p, 8 * g), dv = load8(d, 8 * g);
        for (int k = 0; k < 8; ++k) out.v[k] = 8 * g + k <= last ? pv.v[k] * (dv.v[k] - dot) : 0.f;
      }
      store8(d, 8 * g, out);
    }
  }
}

void require_shape(const void* a, const void* b, std::int64_t matrices, std::int64_t seq) {
  detail::require(matrices > 0 && seq > 0 && seq % 8 == 0, "causal softmax: seq must be a positive multiple of 8");
  detail::require(detail::aligned16(a) && detail::aligned16(b), "causal softmax: scores must be 16-byte aligned");
}

}  // namespace

void causal_softmax_forward(bf16* scores, std::int64_t matrices, std::int64_t seq, cudaStream_t stream) {
  require_shape(scores, scores, matrices, seq);
  const std::int64_t rows = matrices * seq;
  causal_softmax_forward_kernel<<<row_grid(rows), kThreads, 0, stream>>>(scores, rows, seq);
  TWIN_CUDA_CHECK_LAUNCH();
}

void causal_softmax_backward(const bf16* probs, bf16* grad, std::int64_t matrices, std::int64_t seq,
                             cudaStream_t stream) {
  require_shape(probs, grad, matrices, seq);
  const std::int64_t rows = matrices * seq;
  causal_softmax_backward_kernel<<<row_grid(rows), kThreads, 0, stream>>>(probs, grad, rows, seq);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
