// AdamW over fp32 master weights (bias-corrected, decoupled weight decay, as torch.optim.AdamW), and
// the gradient-norm pieces of clipping: a fixed grid of per-block sums of squares reduced in a fixed
// order, so the norm is the same bits every run.
#include <cmath>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::block_sum;
using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;
constexpr int kNormBlocks = 528;  // four waves of 132 multiprocessors

struct AdamWConstants {
  float lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2;
};

// One parameter's update; returns the new master value.
__device__ __forceinline__ float adamw_update(float g, float& m, float& v, float master, const AdamWConstants& c) {
  m = c.beta1 * m + (1.f - c.beta1) * g;
  v = c.beta2 * v + (1.f - c.beta2) * g * g;
  const float update = (m / c.bias_correction1) / (sqrtf(v / c.bias_correction2) + c.eps);
  return master * (1.f - c.lr * c.weight_decay) - c.lr * update;
}

__global__ void adamw_kernel(float* master, float* m, float* v, const bf16* grad, bf16* param, std::int64_t count,
                             AdamWConstants c, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float mi = m[i], vi = v[i];
    const float p = adamw_update(to_float(grad[i]) * scale, mi, vi, master[i], c);
    m[i] = mi;
    v[i] = vi;
    master[i] = p;
    param[i] = to_bf16(p);
  }
}

// Four parameters per thread with 16-byte fp32 and 8-byte bf16 accesses: the step is bandwidth-bound
// (28 bytes per parameter), and wide accesses keep more of them in flight.
__global__ void adamw_vec4_kernel(float4* master, float4* m, float4* v, const uint2* grad, uint2* param,
                                  std::int64_t count4, AdamWConstants c, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count4;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const uint2 g_bits = grad[i];
    const __nv_bfloat162 g01 = *reinterpret_cast<const __nv_bfloat162*>(&g_bits.x);
    const __nv_bfloat162 g23 = *reinterpret_cast<const __nv_bfloat162*>(&g_bits.y);
    const float g[4] = {__low2float(g01) * scale, __high2float(g01) * scale, __low2float(g23) * scale,
                        __high2float(g23) * scale};
    float4 mi = m[i], vi = v[i], pi = master[i];
    pi.x = adamw_update(g[0], mi.x, vi.x, pi.x, c);
    pi.y = adamw_update(g[1], mi.y, vi.y, pi.y, c);
    pi.z = adamw_update(g[2], mi.z, vi.z, pi.z, c);
    pi.w = adamw_update(g[3], mi.w, vi.w, pi.w, c);
    m[i] = mi;
    v[i] = vi;
    master[i] = pi;
    const __nv_bfloat162 p01 = __floats2bfloat162_rn(pi.x, pi.y), p23 = __floats2bfloat162_rn(pi.z, pi.w);
    uint2 p_bits;
    p_bits.x = *reinterpret_cast<const unsigned*>(&p01);
    p_bits.y = *reinterpret_cast<const unsigned*>(&p23);
    param[i] = p_bits;
  }
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

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
  const AdamWConstants c{p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, bias_correction1, bias_correction2};
  const bool vectorizable = count % 4 == 0 && aligned(master, 16) && aligned(m, 16) && aligned(v, 16) &&
                            aligned(grad, 8) && aligned(param, 8);
  if (vectorizable)
    adamw_vec4_kernel<<<detail::grid_for(count / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(master), reinterpret_cast<float4*>(m), reinterpret_cast<float4*>(v),
        reinterpret_cast<const uint2*>(grad), reinterpret_cast<uint2*>(param), count / 4, c, grad_scale);
  else
    adamw_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(master, m, v, grad, param, count, c,
                                                                          grad_scale);
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
