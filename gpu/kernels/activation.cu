// Elementwise kernels: the MLP activations (SwiGLU, GeGLU, quick GeGLU, GeLU (tanh), squared ReLU) forward and backward, and
// the residual add. Grid-stride loops over elements (eight per thread with 16-byte accesses where the shape and
// pointers allow); a gated activation reads the gate and up halves of one row of its [rows, 2 cols] input. One
// kernel template per form (gated, ungated), instantiated per gate function.
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

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
constexpr float kQuickGeluAlpha = 1.702f;  // Hendrycks and Gimpel's sigmoid approximation of GeLU

// GeLU's tanh approximation (Hendrycks and Gimpel 2016; PyTorch's gelu(approximate="tanh"), which Hugging Face
// names gelu_pytorch_tanh and Gemma's MLP uses) and its derivative.
__device__ __forceinline__ float gelu_tanh(float v) {
  return 0.5f * v * (1.f + tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
}
__device__ __forceinline__ float gelu_tanh_derivative(float v) {
  const float t = tanhf(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
  const float dt = kSqrt2OverPi * (1.f + 3.f * kGeluCubic * v * v) * (1.f - t * t);
  return 0.5f * (1.f + t) + 0.5f * v * dt;
}

// The gate functions of the gated MLPs: value f(gate) * up, and the gradients of gate and up from d.
struct Silu {  // SwiGLU (arithmetic as before the gate was a parameter)
  __device__ static float value(float gate, float up) { return gate * sigmoid(gate) * up; }
  __device__ static void grad(float gate, float up, float d, float& d_gate, float& d_up) {
    const float s = sigmoid(gate);
    d_gate = d * up * s * (1.f + gate * (1.f - s));
    d_up = d * (gate * s);
  }
};
struct GeluTanh {  // GeGLU
  __device__ static float value(float gate, float up) { return gelu_tanh(gate) * up; }
  __device__ static void grad(float gate, float up, float d, float& d_gate, float& d_up) {
    d_gate = d * up * gelu_tanh_derivative(gate);
    d_up = d * gelu_tanh(gate);
  }
};

// gpt-oss's GLU (Megatron's quick GeGLU): quick_gelu(g) = g sigmoid(1.702 g) on the gate clamped above at c, times
// the up half clamped to [-c, c] plus the offset; a clamped input passes no gradient (c = 0: no clamp).
struct QuickGelu {
  float offset = 0, clamp = 0;
  __device__ float value(float gate, float up) const {
    const float g = clamp > 0 ? fminf(gate, clamp) : gate;
    const float u = clamp > 0 ? fminf(fmaxf(up, -clamp), clamp) : up;
    return g * sigmoid(kQuickGeluAlpha * g) * (u + offset);
  }
  __device__ void grad(float gate, float up, float d, float& d_gate, float& d_up) const {
    const bool gate_clamped = clamp > 0 && gate > clamp, up_clamped = clamp > 0 && (up > clamp || up < -clamp);
    const float g = gate_clamped ? clamp : gate;
    const float u = clamp > 0 ? fminf(fmaxf(up, -clamp), clamp) : up;
    const float s = sigmoid(kQuickGeluAlpha * g);
    d_gate = gate_clamped ? 0.f : d * (u + offset) * s * (1.f + kQuickGeluAlpha * g * (1.f - s));
    d_up = up_clamped ? 0.f : d * g * s;
  }
};

// The ungated ones: y = f(x), dx = dy f'(x).
struct GeluUngated {
  __device__ static float value(float v) { return gelu_tanh(v); }
  __device__ static float grad(float v, float dy) { return dy * gelu_tanh_derivative(v); }
};
struct SquaredRelu {  // relu(x)^2 (So et al. 2021, Primer; Nemotron-4), derivative 2 relu(x)
  __device__ static float value(float v) { return v > 0.f ? v * v : 0.f; }
  __device__ static float grad(float v, float dy) { return v > 0.f ? dy * 2.f * v : 0.f; }
};

// Gated with cols % 8 == 0: eight columns of one row per thread.
template <class Gate>
__global__ void gated_forward_vec8_kernel(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols,
                                          Gate gate_fn) {
  const std::int64_t count8 = rows * cols / 8;
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < count8;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = 8 * j, r = i / cols, c = i % cols;
    const Float8 gate = load8(in, r * 2 * cols + c), up = load8(in, r * 2 * cols + cols + c);
    Float8 y;
    for (int k = 0; k < 8; ++k) y.v[k] = gate_fn.value(gate.v[k], up.v[k]);
    store8(out, i, y);
  }
}

template <class Gate>
__global__ void gated_backward_vec8_kernel(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows,
                                           std::int64_t cols, Gate gate_fn) {
  const std::int64_t count8 = rows * cols / 8;
  for (std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; j < count8;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = 8 * j, r = i / cols, c = i % cols;
    const Float8 gate = load8(in, r * 2 * cols + c), up = load8(in, r * 2 * cols + cols + c), d = load8(dout, i);
    Float8 d_gate, d_up;
    for (int k = 0; k < 8; ++k) gate_fn.grad(gate.v[k], up.v[k], d.v[k], d_gate.v[k], d_up.v[k]);
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

template <class Gate>
__global__ void gated_forward_kernel(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, Gate gate_fn) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    out[i] = to_bf16(gate_fn.value(to_float(in[r * 2 * cols + c]), to_float(in[r * 2 * cols + cols + c])));
  }
}

template <class Gate>
__global__ void gated_backward_kernel(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows,
                                      std::int64_t cols, Gate gate_fn) {
  const std::int64_t count = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, c = i % cols;
    float d_gate = 0.f, d_up = 0.f;
    gate_fn.grad(to_float(in[r * 2 * cols + c]), to_float(in[r * 2 * cols + cols + c]), to_float(dout[i]), d_gate,
                 d_up);
    din[r * 2 * cols + c] = to_bf16(d_gate);
    din[r * 2 * cols + cols + c] = to_bf16(d_up);
  }
}

template <class F>
__global__ void ungated_forward_kernel(const bf16* x, bf16* y, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = to_bf16(F::value(to_float(x[i])));
}

template <class F>
__global__ void ungated_backward_kernel(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dx[i] = to_bf16(F::grad(to_float(x[i]), to_float(dy[i])));
}

__global__ void residual_add_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

void require_count(std::int64_t count, const char* what) { detail::require(count > 0, what); }

template <class Gate>
void gated_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, cudaStream_t stream,
                   Gate gate = {}) {
  require_count(rows * cols, "gated activation: empty shape");
  if (cols % 8 == 0 && aligned16(in) && aligned16(out))
    gated_forward_vec8_kernel<Gate><<<detail::grid_for(rows * cols / 8, kThreads), kThreads, 0, stream>>>(
        in, out, rows, cols, gate);
  else
    gated_forward_kernel<Gate><<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, out, rows, cols,
                                                                                              gate);
  TWIN_CUDA_CHECK_LAUNCH();
}

template <class Gate>
void gated_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                    cudaStream_t stream, Gate gate = {}) {
  require_count(rows * cols, "gated activation: empty shape");
  if (cols % 8 == 0 && aligned16(in) && aligned16(dout) && aligned16(din))
    gated_backward_vec8_kernel<Gate><<<detail::grid_for(rows * cols / 8, kThreads), kThreads, 0, stream>>>(
        in, dout, din, rows, cols, gate);
  else
    gated_backward_kernel<Gate><<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(in, dout, din,
                                                                                                rows, cols, gate);
  TWIN_CUDA_CHECK_LAUNCH();
}

template <class F>
void ungated_forward(const bf16* x, bf16* y, std::int64_t count, cudaStream_t stream) {
  require_count(count, "activation: empty");
  ungated_forward_kernel<F><<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(x, y, count);
  TWIN_CUDA_CHECK_LAUNCH();
}

template <class F>
void ungated_backward(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count, cudaStream_t stream) {
  require_count(count, "activation: empty");
  ungated_backward_kernel<F><<<detail::grid_for(count, kThreads), kThreads, 0, stream>>>(x, dy, dx, count);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void swiglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  gated_forward<Silu>(in, out, rows, cols, stream);
}
void swiglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream) {
  gated_backward<Silu>(in, dout, din, rows, cols, stream);
}
void geglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  gated_forward<GeluTanh>(in, out, rows, cols, stream);
}
void geglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                    cudaStream_t stream) {
  gated_backward<GeluTanh>(in, dout, din, rows, cols, stream);
}
void quick_geglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, const GluTerms& terms,
                         cudaStream_t stream) {
  detail::require(terms.clamp >= 0, "quick GeGLU: a clamp of 0 (none) or more");
  gated_forward(in, out, rows, cols, stream, QuickGelu{terms.offset, terms.clamp});
}
void quick_geglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                          const GluTerms& terms, cudaStream_t stream) {
  detail::require(terms.clamp >= 0, "quick GeGLU: a clamp of 0 (none) or more");
  gated_backward(in, dout, din, rows, cols, stream, QuickGelu{terms.offset, terms.clamp});
}
void gelu_forward(const bf16* x, bf16* y, std::int64_t count, cudaStream_t stream) {
  ungated_forward<GeluUngated>(x, y, count, stream);
}
void gelu_backward(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count, cudaStream_t stream) {
  ungated_backward<GeluUngated>(x, dy, dx, count, stream);
}
void squared_relu_forward(const bf16* x, bf16* y, std::int64_t count, cudaStream_t stream) {
  ungated_forward<SquaredRelu>(x, y, count, stream);
}
void squared_relu_backward(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count, cudaStream_t stream) {
  ungated_backward<SquaredRelu>(x, dy, dx, count, stream);
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
