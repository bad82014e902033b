// Hidden dropout (gpu/kernels.hpp): the forward draws each element's keep bit from cuRAND's device Philox at the
// element's place in the batch, writes the 1-byte mask and out = residual + mask * x / (1 - p); the backward reads
// the mask. Eight elements per thread (16-byte accesses): the Philox counter of elements g .. g + 7 (g a multiple
// of 8) is set once by curand_init and its two 4-value outputs taken by curand4.
#include <curand_kernel.h>

#include <cmath>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::Float8;
using detail::load8;
using detail::store8;

constexpr int kThreads = 256;

// The keep bits of elements g .. g + 7: byte k of the result's two words is 1 where element g + k is kept.
__device__ __forceinline__ uint2 keep_bits8(std::uint64_t seed, std::uint64_t subsequence, std::uint64_t g,
                                            std::uint32_t threshold) {
  curandStatePhilox4_32_10_t state;
  curand_init(seed, subsequence, g, &state);
  const uint4 first = curand4(&state), second = curand4(&state);
  const unsigned values[8] = {first.x, first.y, first.z, first.w, second.x, second.y, second.z, second.w};
  unsigned words[2] = {0, 0};
  for (int k = 0; k < 8; ++k) words[k / 4] |= (values[k] >= threshold ? 1u : 0u) << (8 * (k % 4));
  return make_uint2(words[0], words[1]);
}

__device__ __forceinline__ bool kept(uint2 bits, int k) { return ((k < 4 ? bits.x : bits.y) >> (8 * (k % 4))) & 1u; }

// Rows [0, rows) of the run (pointers at its first row); groups of eight elements, grid-stride.
__global__ void dropout_add_forward_kernel(const bf16* residual, const bf16* x, bf16* out, uint2* mask8,
                                           std::int64_t groups, std::int64_t cols, std::int64_t first_token,
                                           std::uint64_t seed, std::uint64_t subsequence, std::uint32_t threshold,
                                           float scale) {
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < groups;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t local = 8 * j, row = local / cols, col = local % cols;
    const auto g = static_cast<std::uint64_t>((first_token + row) * cols + col);
    const uint2 bits = keep_bits8(seed, subsequence, g, threshold);
    const Float8 branch = load8(x, local);
    Float8 sum;
    if (residual != nullptr) {
      sum = load8(residual, local);
    } else {
      for (int k = 0; k < 8; ++k) sum.v[k] = 0.f;
    }
    for (int k = 0; k < 8; ++k) sum.v[k] += kept(bits, k) ? branch.v[k] * scale : 0.f;
    store8(out, local, sum);
    mask8[j] = bits;
  }
}

__global__ void dropout_backward_kernel(const bf16* dy, const uint2* mask8, bf16* dx, std::int64_t groups,
                                        float scale) {
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < groups;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const uint2 bits = mask8[j];
    const Float8 d = load8(dy, 8 * j);
    Float8 out;
    for (int k = 0; k < 8; ++k) out.v[k] = kept(bits, k) ? d.v[k] * scale : 0.f;
    store8(dx, 8 * j, out);
  }
}

void require_probability(float p, const char* what) { detail::require(p >= 0.f && p < 1.f, what); }

}  // namespace

std::uint32_t dropout_threshold(float probability) {
  require_probability(probability, "dropout: expected a probability in [0, 1)");
  const double t = std::ceil(static_cast<double>(probability) * 4294967296.0);
  return t >= 4294967295.0 ? 4294967295u : static_cast<std::uint32_t>(t);
}

void dropout_add_forward(const bf16* residual, const bf16* x, bf16* out, std::uint8_t* mask, std::int64_t cols,
                         const DropoutRun& run, const DropoutDraw& draw, cudaStream_t stream) {
  detail::require(cols > 0 && cols % 8 == 0, "dropout_add_forward: cols must be a positive multiple of 8");
  detail::require(run.rows > 0 && run.first_row >= 0 && run.first_token >= 0, "dropout_add_forward: an empty run");
  const std::int64_t offset = run.first_row * cols;
  const bf16* r = residual != nullptr ? residual + offset : nullptr;
  detail::require(detail::aligned16(x + offset) && detail::aligned16(out + offset) &&
                      (r == nullptr || detail::aligned16(r)) && reinterpret_cast<std::uintptr_t>(mask + offset) % 8 == 0,
                  "dropout_add_forward: tensors must be 16-byte aligned (the mask 8-byte)");
  const std::int64_t groups = run.rows * cols / 8;
  dropout_add_forward_kernel<<<detail::grid_for(groups, kThreads), kThreads, 0, stream>>>(
      r, x + offset, out + offset, reinterpret_cast<uint2*>(mask + offset), groups, cols, run.first_token, draw.seed,
      draw.subsequence, dropout_threshold(draw.probability), 1.f / (1.f - draw.probability));
  TWIN_CUDA_CHECK_LAUNCH();
}

void dropout_backward(const bf16* dy, const std::uint8_t* mask, bf16* dx, std::int64_t count, float probability,
                      cudaStream_t stream) {
  require_probability(probability, "dropout_backward: expected a probability in [0, 1)");
  detail::require(count > 0 && count % 8 == 0, "dropout_backward: count must be a positive multiple of 8");
  detail::require(detail::aligned16(dy) && detail::aligned16(dx) && reinterpret_cast<std::uintptr_t>(mask) % 8 == 0,
                  "dropout_backward: tensors must be 16-byte aligned (the mask 8-byte)");
  dropout_backward_kernel<<<detail::grid_for(count / 8, kThreads), kThreads, 0, stream>>>(
      dy, reinterpret_cast<const uint2*>(mask), dx, count / 8, 1.f / (1.f - probability));
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
