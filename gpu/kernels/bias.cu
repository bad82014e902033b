// Linear biases (GPT's add_bias_linear): the add after a linear's GEMM and its gradient, the column sums of the
// output gradient. The gradient avoids atomics so its bits do not vary run to run: each block of rows writes fp32
// partial column sums in row order, and norm.cu's reduction sums the partials in block order (as the norms'
// weight gradients are reduced).
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;

constexpr int kThreads = 256;

__global__ void bias_add_kernel(bf16* y, const bf16* bias, std::int64_t count, std::int64_t cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count; i += stride)
    y[i] = to_bf16(to_float(y[i]) + to_float(bias[i % cols]));
}

// Block (x, y): columns [x * blockDim, (x + 1) * blockDim) over the y-th of `blocks` even runs of rows.
__global__ void bias_grad_partials_kernel(const bf16* dy, float* partials, std::int64_t rows, std::int64_t cols) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const std::int64_t blocks = gridDim.y, b = blockIdx.y;
  const std::int64_t first = b * rows / blocks, end = (b + 1) * rows / blocks;
  float sum = 0.f;
  for (std::int64_t r = first; r < end; ++r) sum += to_float(dy[r * cols + c]);
  partials[b * cols + c] = sum;
}

}  // namespace

void bias_add(bf16* y, const bf16* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  detail::require(rows > 0 && cols > 0, "bias_add needs rows > 0 and cols > 0");
  bias_add_kernel<<<detail::grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, bias, rows * cols, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void bias_grad(const bf16* dy, float* partials, GradRef grad, bool accumulate, std::int64_t rows, std::int64_t cols,
               cudaStream_t stream) {
  detail::require(rows > 0 && cols > 0, "bias_grad needs rows > 0 and cols > 0");
  const std::int64_t blocks = norm_partial_blocks(rows);
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads), static_cast<unsigned>(blocks));
  bias_grad_partials_kernel<<<grid, kThreads, 0, stream>>>(dy, partials, rows, cols);
  TWIN_CUDA_CHECK_LAUNCH();
  norm_weight_grad_reduce(partials, blocks, cols, grad, accumulate, stream);
}

void add_bias_grad_sums(const void* sums, float* partials, GradRef grad, std::int64_t cols, cudaStream_t stream) {
  switch (grad.type) {
    case GradType::bf16: return bias_grad(static_cast<const bf16*>(sums), partials, grad, true, 1, cols, stream);
    case GradType::f32: return norm_weight_grad_reduce(static_cast<const float*>(sums), 1, cols, grad, true, stream);
  }
}

}  // namespace twin::kernels
