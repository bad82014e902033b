// Mixture-of-experts routing: top-k of the router's softmax (one warp per token, ties to the lower
// expert index), and the row gathers that move tokens into expert order and back (weighted).
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;
using detail::warp_max;
using detail::warp_sum;

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxTopK = 8;

__global__ void router_topk_kernel(const bf16* logits, std::int32_t* expert_index, float* expert_weight,
                                   std::int64_t tokens, int experts, int top_k) {
  __shared__ int chosen[kWarpsPerBlock][kMaxTopK];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int64_t t = blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + warp;
  if (t >= tokens) return;  // whole warps leave together: no block barrier follows
  const bf16* row = logits + t * experts;
  float m = -INFINITY;
  for (int e = lane; e < experts; e += 32) m = fmaxf(m, to_float(row[e]));
  m = warp_max(m);
  float s = 0.f;
  for (int e = lane; e < experts; e += 32) s += expf(to_float(row[e]) - m);
  s = warp_sum(s);
  float chosen_sum = 0.f;
  for (int k = 0; k < top_k; ++k) {
    float best = -INFINITY;
    int best_index = experts;
    for (int e = lane; e < experts; e += 32) {
      bool taken = false;
      for (int j = 0; j < k; ++j) taken |= chosen[warp][j] == e;
      const float value = to_float(row[e]);
      if (!taken && (value > best || (value == best && e < best_index))) {
        best = value;
        best_index = e;
      }
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_index = __shfl_xor_sync(0xffffffffu, best_index, offset);
      if (other > best || (other == best && other_index < best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (lane == 0) chosen[warp][k] = best_index;
    __syncwarp();
    const float p = expf(best - m) / s;
    chosen_sum += p;
    if (lane == 0) {
      expert_index[t * top_k + k] = best_index;
      expert_weight[t * top_k + k] = p;
    }
  }
  __syncwarp();
  if (lane < top_k) expert_weight[t * top_k + lane] /= chosen_sum;
}

__global__ void permute_kernel(const bf16* in, const std::int32_t* source_row, bf16* out, std::int64_t out_rows,
                               std::int64_t cols) {
  const std::int64_t count = out_rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    out[i] = in[static_cast<std::int64_t>(source_row[r]) * cols + c];
  }
}

__global__ void unpermute_kernel(const bf16* in, const std::int32_t* routed_row, const float* weight, bf16* out,
                                 std::int64_t tokens, int top_k, std::int64_t cols) {
  const std::int64_t count = tokens * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / cols, c = i % cols;
    float sum = 0.f;
    for (int k = 0; k < top_k; ++k)
      sum += weight[t * top_k + k] * to_float(in[static_cast<std::int64_t>(routed_row[t * top_k + k]) * cols + c]);
    out[i] = to_bf16(sum);
  }
}

}  // namespace

void moe_router_topk(const bf16* logits, std::int32_t* expert_index, float* expert_weight, std::int64_t tokens,
                     int experts, int top_k, cudaStream_t stream) {
  detail::require(tokens > 0 && experts > 0 && experts <= 1024 && top_k >= 1 && top_k <= kMaxTopK && top_k <= experts,
                  "moe_router_topk: need tokens > 0, 1 <= top_k <= min(8, experts), experts <= 1024");
  const unsigned blocks = static_cast<unsigned>((tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  router_topk_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(logits, expert_index, expert_weight, tokens, experts,
                                                                 top_k);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_permute(const bf16* in, const std::int32_t* source_row, bf16* out, std::int64_t out_rows, std::int64_t cols,
                 cudaStream_t stream) {
  detail::require(out_rows > 0 && cols > 0, "moe_permute: empty shape");
  permute_kernel<<<detail::grid_for(out_rows * cols, 256), 256, 0, stream>>>(in, source_row, out, out_rows, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void moe_unpermute(const bf16* in, const std::int32_t* routed_row, const float* weight, bf16* out,
                   std::int64_t tokens, int top_k, std::int64_t cols, cudaStream_t stream) {
  detail::require(tokens > 0 && cols > 0 && top_k >= 1, "moe_unpermute: empty shape");
  unpermute_kernel<<<detail::grid_for(tokens * cols, 256), 256, 0, stream>>>(in, routed_row, weight, out, tokens,
                                                                            top_k, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
