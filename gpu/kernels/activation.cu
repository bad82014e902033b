// Elementwise kernels: SwiGLU and GeLU (tanh) forward and backward, and the residual add. Grid-stride
// loops over elements; SwiGLU reads the gate and up halves of one row of its [rows, 2 cols] input.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

__global__ void swiglu_forward_kernel(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    const float gate = to_float(in[r * 2 * cols + c]), up = to_float(in[r * 2 * cols + cols + c]);
    out[i] = to_bf16(gate * sigmoid(gate) * up);
  }
}

__global__ void swiglu_backward_kernel(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows,
                                       std::int64_t cols) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    const float gate = to_float(in[r * 2 * cols + c]), up = to_float(in[r * 2 * cols + cols + c]);
    const float d = to_float(dout[i]);
    const float s = sigmoid(gate);
    const float silu = gate * s;
    din[r * 2 * cols + c] = to_bf16(d * up * s * (1.f + gate * (1.f - s)));
    din[r * 2 * cols + cols + c] = to_bf16(d * silu);
  }
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

__global__ void gelu_forward_kernel(const bf16* x, bf16* y, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = to_float(x[i]);
    y[i] = to_bf16(0.5f * v * (1.f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v))));
  }
}

__global__ void gelu_backward_kernel(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = to_float(x[i]);
    const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float dt = kSqrt2OverPi * (1.f + 3.f * kGeluCubic * v * v) * (1.f - t * t);
    dx[i] = to_bf16(to_float(dy[i]) * (0.5f * (1.f + t) + 0.5f * v * dt));
  }
}

__global__ void residual_add_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

void require_count(std::int64_t count, const char* what) { detail::require(count > 0, what); }

}  // namespace

void swiglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  require_count(rows * cols, "swiglu: empty shape");
  swiglu_forward_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, out, rows, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream) {
  require_count(rows * cols, "swiglu: empty shape");
  swiglu_backward_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, dout, din, rows, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void gelu_forward(const bf16* x, bf16* y, std::int64_t count, cudaStream_t stream) {
  require_count(count, "gelu: empty");
  gelu_forward_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(x, y, count);
  TWIN_CUDA_CHECK_LAUNCH();
}

void gelu_backward(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count, cudaStream_t stream) {
  require_count(count, "gelu: empty");
  gelu_backward_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(x, dy, dx, count);
  TWIN_CUDA_CHECK_LAUNCH();
}

void residual_add(const bf16* a, const bf16* b, bf16* out, std::int64_t count, cudaStream_t stream) {
  require_count(count, "residual_add: empty");
  residual_add_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(a, b, out, count);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
