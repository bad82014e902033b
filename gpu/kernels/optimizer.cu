// AdamW (bias-corrected, decoupled weight decay, as torch.optim.AdamW) over fp32 master weights, the bf16
// parameters with 16-bit remainders, or the bf16 parameters themselves, moments in fp32 or bf16 (the math fp32
// either way), and
// the gradient-norm pieces of clipping: a fixed grid of per-block sums of squares reduced in a fixed
// order, so the norm is the same bits every run.
#include <cmath>
#include <type_traits>

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

// Loads and stores of 1 or 4 consecutive state values, fp32 or bf16 (rounded to nearest), as fp32.
__device__ __forceinline__ float load1(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float load1(const bf16* p, std::int64_t i) { return to_float(p[i]); }
__device__ __forceinline__ void store1(float* p, std::int64_t i, float x) { p[i] = x; }
__device__ __forceinline__ void store1(bf16* p, std::int64_t i, float x) { p[i] = to_bf16(x); }

__device__ __forceinline__ float4 load4(const float* p, std::int64_t i) { return reinterpret_cast<const float4*>(p)[i]; }
__device__ __forceinline__ float4 load4(const bf16* p, std::int64_t i) {
  const uint2 bits = reinterpret_cast<const uint2*>(p)[i];
  const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&bits.x);
  const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&bits.y);
  return make_float4(__low2float(lo), __high2float(lo), __low2float(hi), __high2float(hi));
}
__device__ __forceinline__ void store4(float* p, std::int64_t i, float4 x) { reinterpret_cast<float4*>(p)[i] = x; }
__device__ __forceinline__ void store4(bf16* p, std::int64_t i, float4 x) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
  uint2 bits;
  bits.x = *reinterpret_cast<const unsigned*>(&lo);
  bits.y = *reinterpret_cast<const unsigned*>(&hi);
  reinterpret_cast<uint2*>(p)[i] = bits;
}

// Master is float (fp32 master weights) or bf16 (none: `master` is the parameter array itself, updated in
// place); M and V store the moments. The math is fp32 in every variant.
template <typename Master, typename M, typename V, typename G>
__global__ void adamw_kernel(Master* master, M* m, V* v, const G* grad, bf16* param, std::int64_t count,
                             AdamWConstants c, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float mi = load1(m, i), vi = load1(v, i);
    const float p = adamw_update(load1(grad, i) * scale, mi, vi, load1(master, i), c);
    store1(m, i, mi);
    store1(v, i, vi);
    if constexpr (std::is_same_v<Master, float>) store1(master, i, p);
    param[i] = to_bf16(p);
  }
}

// Four parameters per thread with 16-byte fp32 and 8-byte bf16 accesses: the step is bandwidth-bound
// (28 bytes per parameter in fp32), and wide accesses keep more of them in flight.
template <typename Master, typename M, typename V, typename G>
__global__ void adamw_vec4_kernel(Master* master, M* m, V* v, const G* grad, bf16* param, std::int64_t count4,
                                  AdamWConstants c, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count4;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float4 g = load4(grad, i);
    float4 mi = load4(m, i), vi = load4(v, i), pi = load4(master, i);
    pi.x = adamw_update(g.x * scale, mi.x, vi.x, pi.x, c);
    pi.y = adamw_update(g.y * scale, mi.y, vi.y, pi.y, c);
    pi.z = adamw_update(g.z * scale, mi.z, vi.z, pi.z, c);
    pi.w = adamw_update(g.w * scale, mi.w, vi.w, pi.w, c);
    store4(m, i, mi);
    store4(v, i, vi);
    if constexpr (std::is_same_v<Master, float>) store4(master, i, pi);
    store4(param, i, pi);
  }
}

// The fp32 master a parameter and its remainder hold, and the split back (AdamWState::remainders; Transformer
// Engine's multi_tensor_adam_param_remainder, transformer_engine/common/multi_tensor/adam.cu: "undo rounding" where
// the remainder is negative, "round up" where it is).
__device__ __forceinline__ float joined_master(bf16 param, std::int16_t remainder) {
  unsigned high = __bfloat16_as_ushort(param);
  if (remainder < 0) high -= 1;
  return __uint_as_float(((high & 0xffffu) << 16) | static_cast<std::uint16_t>(remainder));
}
__device__ __forceinline__ bf16 split_master(float master, std::int16_t& remainder) {
  const unsigned bits = __float_as_uint(master);
  remainder = static_cast<std::int16_t>(bits & 0xffffu);
  unsigned high = bits >> 16;
  if (remainder < 0) high += 1;
  return __ushort_as_bfloat16(static_cast<unsigned short>(high & 0xffffu));
}

// The master as the parameters and their remainders: 2 + 2 bytes a parameter where fp32 master weights take 4 + 2.
template <typename M, typename V, typename G>
__global__ void adamw_remainder_kernel(std::int16_t* remainders, M* m, V* v, const G* grad, bf16* param,
                                       std::int64_t count, AdamWConstants c, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float mi = load1(m, i), vi = load1(v, i);
    const float p = adamw_update(load1(grad, i) * scale, mi, vi, joined_master(param[i], remainders[i]), c);
    store1(m, i, mi);
    store1(v, i, vi);
    std::int16_t remainder;
    param[i] = split_master(p, remainder);
    remainders[i] = remainder;
  }
}

// Four parameters per thread: 8-byte loads of the parameters' and remainders' bits, 16-byte fp32 moments (the step
// moves 26 bytes a parameter in fp32 moments, where the whole fp32 master's takes 28).
template <typename M, typename V, typename G>
__global__ void adamw_remainder_vec4_kernel(std::int16_t* remainders, M* m, V* v, const G* grad, bf16* param,
                                            std::int64_t count4, AdamWConstants c, const float* grad_scale) {
  const float scale = grad_scale ? *grad_scale : 1.f;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count4;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float4 g = load4(grad, i);
    float4 mi = load4(m, i), vi = load4(v, i);
    ushort4 p = reinterpret_cast<const ushort4*>(param)[i];
    short4 r = reinterpret_cast<const short4*>(remainders)[i];
    const auto update = [&](float gradient, float& moment1, float& moment2, unsigned short& bits, short& remainder) {
      const float master = joined_master(__ushort_as_bfloat16(bits), remainder);
      bits = __bfloat16_as_ushort(split_master(adamw_update(gradient * scale, moment1, moment2, master, c), remainder));
    };
    update(g.x, mi.x, vi.x, p.x, r.x);
    update(g.y, mi.y, vi.y, p.y, r.y);
    update(g.z, mi.z, vi.z, p.z, r.z);
    update(g.w, mi.w, vi.w, p.w, r.w);
    store4(m, i, mi);
    store4(v, i, vi);
    reinterpret_cast<ushort4*>(param)[i] = p;
    reinterpret_cast<short4*>(remainders)[i] = r;
  }
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// One 16-byte load of gradients, their squares added to s: eight bf16 in pairs (the order the bits were first measured
// in), or four fp32.
__device__ __forceinline__ void add_squares(float& s, const bf16* body, std::int64_t i) {
  const detail::Float8 x = detail::load8(body, 8 * i);
  for (int k = 0; k < 8; k += 2) s += x.v[k] * x.v[k] + x.v[k + 1] * x.v[k + 1];
}
__device__ __forceinline__ void add_squares(float& s, const float* body, std::int64_t i) {
  const float4 x = reinterpret_cast<const float4*>(body)[i];
  s += x.x * x.x + x.y * x.y + (x.z * x.z + x.w * x.w);
}

// 16-byte loads over the aligned body, one element at a time over the unaligned head and the tail: the pass reads the
// gradients once, at close to the HBM rate. Each thread's share is fixed by the grid, so the sum is the same bits
// every run.
template <typename G>
__global__ void sum_squares_kernel(const G* grad, std::int64_t count, float* partials) {
  constexpr std::int64_t kWidth = 16 / sizeof(G);
  __shared__ float scratch[32];
  const std::int64_t thread = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const auto address = reinterpret_cast<std::uintptr_t>(grad);
  const std::int64_t aligned_from = static_cast<std::int64_t>((16 - address % 16) % 16 / sizeof(G));
  const std::int64_t head = aligned_from < count ? aligned_from : count;
  const std::int64_t body = (count - head) / kWidth, tail = head + body * kWidth;
  float s = 0.f;
  for (std::int64_t i = thread; i < body; i += threads) add_squares(s, grad + head, i);
  for (std::int64_t i = thread; i < head + (count - tail); i += threads) {
    const float g = to_float(grad[i < head ? i : tail + (i - head)]);
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

namespace {

template <typename M, typename V, typename G>
void launch_adamw(std::int16_t* remainders, M* m, V* v, const G* grad, bf16* param, std::int64_t count,
                  const AdamWConstants& c, const float* grad_scale, cudaStream_t stream) {
  const bool vectorizable = count % 4 == 0 && aligned(remainders, 8) && aligned(m, 4 * sizeof(M)) &&
                            aligned(v, 4 * sizeof(V)) && aligned(grad, 4 * sizeof(G)) && aligned(param, 8);
  if (vectorizable)
    adamw_remainder_vec4_kernel<<<detail::grid_for(count / 4, kThreads), kThreads, 0, stream>>>(
        remainders, m, v, grad, param, count / 4, c, grad_scale);
  else
    adamw_remainder_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(remainders, m, v, grad, param,
                                                                                      count, c, grad_scale);
  TWIN_CUDA_CHECK_LAUNCH();
}

template <typename Master, typename M, typename V, typename G>
void launch_adamw(Master* master, M* m, V* v, const G* grad, bf16* param, std::int64_t count,
                  const AdamWConstants& c, const float* grad_scale, cudaStream_t stream) {
  const bool vectorizable = count % 4 == 0 && aligned(master, 4 * sizeof(Master)) && aligned(m, 4 * sizeof(M)) &&
                            aligned(v, 4 * sizeof(V)) && aligned(grad, 4 * sizeof(G)) && aligned(param, 8);
  if (vectorizable)
    adamw_vec4_kernel<<<detail::grid_for(count / 4, kThreads), kThreads, 0, stream>>>(master, m, v, grad, param,
                                                                                     count / 4, c, grad_scale);
  else
    adamw_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(master, m, v, grad, param, count, c,
                                                                          grad_scale);
  TWIN_CUDA_CHECK_LAUNCH();
}

template <typename Master, typename M, typename G>
void dispatch_v(Master* master, M* m, const AdamWState& s, const G* grad, bf16* param, std::int64_t count,
                const AdamWConstants& c, const float* grad_scale, cudaStream_t stream) {
  if (s.v_type == StateType::bf16)
    launch_adamw(master, m, static_cast<bf16*>(s.v), grad, param, count, c, grad_scale, stream);
  else
    launch_adamw(master, m, static_cast<float*>(s.v), grad, param, count, c, grad_scale, stream);
}

template <typename Master, typename G>
void dispatch_m(Master* master, const AdamWState& s, const G* grad, bf16* param, std::int64_t count,
                const AdamWConstants& c, const float* grad_scale, cudaStream_t stream) {
  if (s.m_type == StateType::bf16)
    dispatch_v(master, static_cast<bf16*>(s.m), s, grad, param, count, c, grad_scale, stream);
  else
    dispatch_v(master, static_cast<float*>(s.m), s, grad, param, count, c, grad_scale, stream);
}

// The gradient's type, the last of the dispatch's template arguments.
template <typename Master>
void dispatch_grad(Master* master, const AdamWState& s, GradRef grad, bf16* param, std::int64_t count,
                   const AdamWConstants& c, const float* grad_scale, cudaStream_t stream) {
  switch (grad.type) {
    case GradType::bf16:
      return dispatch_m(master, s, static_cast<const bf16*>(grad.data), param, count, c, grad_scale, stream);
    case GradType::f32:
      return dispatch_m(master, s, static_cast<const float*>(grad.data), param, count, c, grad_scale, stream);
  }
}

}  // namespace

void adamw_step(const AdamWState& state, GradRef grad, bf16* param, std::int64_t count, const AdamWParams& p,
                const float* grad_scale, cudaStream_t stream) {
  detail::require(count > 0 && p.step >= 1, "adamw: empty tensor or step < 1");
  detail::require(state.m && state.v, "adamw: no moment arrays");
  const float bias_correction1 = 1.f - std::pow(p.beta1, static_cast<float>(p.step));
  const float bias_correction2 = 1.f - std::pow(p.beta2, static_cast<float>(p.step));
  const AdamWConstants c{p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, bias_correction1, bias_correction2};
  detail::require(!(state.master && state.remainders), "adamw: fp32 master weights and remainders both given");
  detail::require(grad.data != nullptr, "adamw: no gradient");
  if (state.master)
    dispatch_grad(state.master, state, grad, param, count, c, grad_scale, stream);
  else if (state.remainders)
    dispatch_grad(state.remainders, state, grad, param, count, c, grad_scale, stream);
  else
    dispatch_grad(param, state, grad, param, count, c, grad_scale, stream);
}

int grad_norm_partial_count() { return kNormBlocks; }

void grad_sum_squares(GradRef grad, std::int64_t count, float* partials, float* sum_squares, cudaStream_t stream) {
  detail::require(count > 0 && grad.data != nullptr, "grad_sum_squares: empty tensor");
  switch (grad.type) {
    case GradType::bf16:
      sum_squares_kernel<<<kNormBlocks, kThreads, 0, stream>>>(static_cast<const bf16*>(grad.data), count, partials);
      break;
    case GradType::f32:
      sum_squares_kernel<<<kNormBlocks, kThreads, 0, stream>>>(static_cast<const float*>(grad.data), count, partials);
      break;
  }
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
