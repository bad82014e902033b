// AdamW over fp32 master weights (bias-corrected, decoupled weight decay, as torch.optim.AdamW), and
// the gradient-norm pieces of clipping: a fixed grid of per-block sums of squares reduced in a fixed
// order, so the norm is the same bits every run.
#include <cmath>

#include "executor/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::block_sum;
using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;
constexpr int kNormBlocks = 528;  // four waves of 132 multiprocessors

__global__ void adamw_kernel(float* master, float* m, float* v, const bf16* grad, bf16* param, std::int64_t count,
                             float lr, float beta1, float beta2, float eps, float weight_decay,
                             float bias_correction1, float bias_correction2, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_float(grad[i]) * scale;
    const float mi = beta1 * m[i] + (1.f - beta1) * g;
    const float vi = beta2 * v[i] + (1.f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float update = (mi / bias_correction1) / (sqrtf(vi / bias_correction2) + eps);
    const float p = master[i] * (1.f - lr * weight_decay) - lr * update;
    master[i] = p;
    param[i] = to_bf16(p);
  }
}

__global__ void sum_squares_kernel(const bf16* grad, std::int64_t count, float* partials) {
  __shared__ float scratch[32];
  float s = 0.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_float(grad[i]);
    s += g * g;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(const float* partials, int count, float* sum_squares) {
  __shared__ float scratch[32];
  float s = 0.f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) *sum_squares += s;
}

__global__ void clip_scale_kernel(const float* sum_squares, float max_norm, float* scale) {
  *scale = fminf(1.f, max_norm / (sqrtf(*sum_squares) + 1e-6f));
}

}  // namespace

void adamw_step(float* master, float* m, float* v, const bf16* grad, bf16* param, std::int64_t count,
                const AdamWParams& p, const float* grad_scale, cudaStream_t stream) {
  detail::require(count > 0 && p.step >= 1, "adamw: empty tensor or step < 1");
  const float bias_correction1 = 1.f - std::pow(p.beta1, static_cast<float>(p.step));
  const float bias_correction2 = 1.f - std::pow(p.beta2, static_cast<float>(p.step));
  adamw_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(
      master, m, v, grad, param, count, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, bias_correction1,
      bias_correction2, grad_scale);
  TWIN_CUDA_CHECK_LAUNCH();
}

int grad_norm_partial_count() { return kNormBlocks; }

void grad_sum_squares(const bf16* grad, std::int64_t count, float* partials, float* sum_squares, cudaStream_t stream) {
  detail::require(count > 0, "grad_sum_squares: empty tensor");
  sum_squares_kernel<<<kNormBlocks, kThreads, 0, stream>>>(grad, count, partials);
  TWIN_CUDA_CHECK_LAUNCH();
  sum_partials_kernel<<<1, 1024, 0, stream>>>(partials, kNormBlocks, sum_squares);
  TWIN_CUDA_CHECK_LAUNCH();
}

void grad_clip_scale(const float* sum_squares, float max_norm, float* scale, cudaStream_t stream) {
  detail::require(max_norm > 0, "grad_clip_scale: max_norm must be positive");
  clip_scale_kernel<<<1, 1, 0, stream>>>(sum_squares, max_norm, scale);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
