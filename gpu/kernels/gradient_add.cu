// A weight gradient written apart (bf16) added into the main gradient, as Megatron's main_grad.add_ hook adds
// param.grad: into a bf16 main gradient by the residual add's kernels (the same bits as before this file), into an
// fp32 one by a kernel of its own that reads 2 and reads and writes 4 bytes an element.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void add_to_f32_kernel(const bf16* x, float* grad, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    grad[i] += detail::to_float(x[i]);
}

// Eight elements a thread: one 16-byte load of x, two of the gradient.
__global__ void add_to_f32_vec8_kernel(const bf16* x, float* grad, std::int64_t count8) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count8;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const detail::Float8 v = detail::load8(x, 8 * i);
    auto* g = reinterpret_cast<float4*>(grad + 8 * i);
    float4 lo = g[0], hi = g[1];
    lo.x += v.v[0], lo.y += v.v[1], lo.z += v.v[2], lo.w += v.v[3];
    hi.x += v.v[4], hi.y += v.v[5], hi.z += v.v[6], hi.w += v.v[7];
    g[0] = lo, g[1] = hi;
  }
}

}  // namespace

void add_to_gradient(const bf16* x, GradRef grad, std::int64_t count, cudaStream_t stream) {
  detail::require(count > 0 && grad.data != nullptr, "add_to_gradient: empty");
  switch (grad.type) {
    case GradType::bf16: {
      auto* g = static_cast<bf16*>(grad.data);
      return residual_add(g, x, g, count, stream);
    }
    case GradType::f32: {
      auto* g = static_cast<float*>(grad.data);
      if (count % 8 == 0 && detail::aligned16(x) && detail::aligned16(g))
        add_to_f32_vec8_kernel<<<detail::grid_for(count / 8, kThreads), kThreads, 0, stream>>>(x, g, count / 8);
      else
        add_to_f32_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(x, g, count);
      TWIN_CUDA_CHECK_LAUNCH();
      return;
    }
  }
}

}  // namespace twin::kernels
