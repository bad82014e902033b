// Softmax cross-entropy over a vocabulary shard, one block per row, in the passes a vocab-parallel
// loss needs (the all-reduces between them belong to the caller). Exponentials are of (logit - max),
// so they never overflow.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::block_max;
using detail::block_sum;
using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 512;

__global__ void local_max_kernel(const bf16* logits, float* row_max, std::int64_t vocab) {
  __shared__ float scratch[32];
  const bf16* row = logits + blockIdx.x * vocab;
  float m = -INFINITY;
  for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) m = fmaxf(m, to_float(row[v]));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

__global__ void local_sum_exp_kernel(const bf16* logits, const float* global_max, const std::int32_t* targets,
                                     float* sum_exp, float* target_logit, std::int64_t vocab,
                                     std::int64_t vocab_start) {
  __shared__ float scratch[32];
  const bf16* row = logits + blockIdx.x * vocab;
  const float m = global_max[blockIdx.x];
  float s = 0.f;
  for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) s += expf(to_float(row[v]) - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    sum_exp[blockIdx.x] = s;
    const std::int64_t local = static_cast<std::int64_t>(targets[blockIdx.x]) - vocab_start;
    target_logit[blockIdx.x] = local >= 0 && local < vocab ? to_float(row[local]) : 0.f;
  }
}

__global__ void loss_kernel(const float* global_max, const float* global_sum_exp, const float* target_logit,
                            float* loss, std::int64_t rows) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < rows) loss[r] = logf(global_sum_exp[r]) + global_max[r] - target_logit[r];
}

__global__ void backward_kernel(const bf16* logits, const float* global_max, const float* global_sum_exp,
                                const std::int32_t* targets, bf16* dlogits, std::int64_t vocab,
                                std::int64_t vocab_start, float grad_scale) {
  const std::int64_t r = blockIdx.x;
  const float m = global_max[r];
  const float inverse_sum = 1.f / global_sum_exp[r];
  const std::int64_t target = static_cast<std::int64_t>(targets[r]) - vocab_start;
  for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = expf(to_float(logits[r * vocab + v]) - m) * inverse_sum;
    dlogits[r * vocab + v] = to_bf16((p - (v == target ? 1.f : 0.f)) * grad_scale);
  }
}

void check(std::int64_t rows, std::int64_t vocab) {
  detail::require(rows > 0 && rows <= 0x7fffffff && vocab > 0, "cross entropy: bad shape");
}

}  // namespace

void cross_entropy_local_max(const bf16* logits, float* row_max, std::int64_t rows, std::int64_t vocab_shard,
                             cudaStream_t stream) {
  check(rows, vocab_shard);
  local_max_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, row_max, vocab_shard);
  TWIN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_local_sum_exp(const bf16* logits, const float* global_max, const std::int32_t* targets,
                                 float* sum_exp, float* target_logit, std::int64_t rows, std::int64_t vocab_shard,
                                 std::int64_t vocab_start, cudaStream_t stream) {
  check(rows, vocab_shard);
  local_sum_exp_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, global_max, targets, sum_exp,
                                                                            target_logit, vocab_shard, vocab_start);
  TWIN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_loss(const float* global_max, const float* global_sum_exp, const float* target_logit, float* loss,
                        std::int64_t rows, cudaStream_t stream) {
  check(rows, 1);
  loss_kernel<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream>>>(global_max, global_sum_exp, target_logit,
                                                                            loss, rows);
  TWIN_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(const bf16* logits, const float* global_max, const float* global_sum_exp,
                            const std::int32_t* targets, bf16* dlogits, std::int64_t rows, std::int64_t vocab_shard,
                            std::int64_t vocab_start, float grad_scale, cudaStream_t stream) {
  check(rows, vocab_shard);
  backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, global_max, global_sum_exp, targets,
                                                                        dlogits, vocab_shard, vocab_start, grad_scale);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
