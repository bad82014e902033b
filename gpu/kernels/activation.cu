// Elementwise kernels: SwiGLU and GeLU (tanh) forward and backward, and the residual add. Grid-stride
// loops over elements (eight per thread with 16-byte accesses where the shape and pointers allow); SwiGLU
// reads the gate and up halves of one row of its [rows, 2 cols] input.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;
using detail::Float8;
using detail::load8;
using detail::store8;
using detail::aligned16;

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

// SwiGLU with cols % 8 == 0: eight columns of one row per thread.
__global__ void swiglu_forward_vec8_kernel(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols) {
  const std::int64_t count8 = rows * cols / 8;
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < count8;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = 8 * j, r = i / cols, c = i % cols;
    const Float8 gate = load8(in, r * 2 * cols + c), up = load8(in, r * 2 * cols + cols + c);
    Float8 y;
    for (int k = 0; k < 8; ++k) y.v[k] = gate.v[k] * sigmoid(gate.v[k]) * up.v[k];
    store8(out, i, y);
  }
}

__global__ void swiglu_backward_vec8_kernel(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows,
                                            std::int64_t cols) {
  const std::int64_t count8 = rows * cols / 8;
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < count8;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = 8 * j, r = i / cols, c = i % cols;
    const Float8 gate = load8(in, r * 2 * cols + c), up = load8(in, r * 2 * cols + cols + c), d = load8(dout, i);
    Float8 d_gate, d_up;
    for (int k = 0; k < 8; ++k) {
      const float sg = sigmoid(gate.v[k]);
      d_gate.v[k] = d.v[k] * up.v[k] * sg * (1.f + gate.v[k] * (1.f - sg));
      d_up.v[k] = d.v[k] * (gate.v[k] * sg);
    }
    store8(din, r * 2 * cols + c, d_gate);
    store8(din, r * 2 * cols + cols + c, d_up);
  }
}

__global__ void residual_add_vec8_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t count8) {
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < count8;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const Float8 x = load8(a, 8 * j), y = load8(b, 8 * j);
    Float8 sum;
    for (int k = 0; k < 8; ++k) sum.v[k] = x.v[k] + y.v[k];
    store8(out, 8 * j, sum);
  }
}

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
  if (cols % 8 == 0 && aligned16(in) && aligned16(out))
    swiglu_forward_vec8_kernel<<<detail::grid_for(rows * cols / 8, kThreads), kThreads, 0, stream>>>(in, out, rows,
                                                                                                    cols);
  else
    swiglu_forward_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, out, rows, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void swiglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream) {
  require_count(rows * cols, "swiglu: empty shape");
  if (cols % 8 == 0 && aligned16(in) && aligned16(dout) && aligned16(din))
    swiglu_backward_vec8_kernel<<<detail::grid_for(rows * cols / 8, kThreads), kThreads, 0, stream>>>(in, dout, din,
                                                                                                     rows, cols);
  else
    swiglu_backward_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, dout, din, rows,
                                                                                          cols);
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

void mlp_activation_forward(bool gated, const bf16* fc1, bf16* out, std::int64_t rows, std::int64_t cols,
                            cudaStream_t stream) {
  if (gated)
    swiglu_forward(fc1, out, rows, cols, stream);
  else
    gelu_forward(fc1, out, rows * cols, stream);
}

void mlp_activation_backward(bool gated, const bf16* fc1, const bf16* dout, bf16* d_fc1, std::int64_t rows,
                             std::int64_t cols, cudaStream_t stream) {
  if (gated)
    swiglu_backward(fc1, dout, d_fc1, rows, cols, stream);
  else
    gelu_backward(fc1, dout, d_fc1, rows * cols, stream);
}

void residual_add(const bf16* a, const bf16* b, bf16* out, std::int64_t count, cudaStream_t stream) {
  require_count(count, "residual_add: empty");
  if (count % 8 == 0 && aligned16(a) && aligned16(b) && aligned16(out))
    residual_add_vec8_kernel<<<detail::grid_for(count / 8, kThreads), kThreads, 0, stream>>>(a, b, out, count / 8);
  else
    residual_add_kernel<<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(a, b, out, count);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
