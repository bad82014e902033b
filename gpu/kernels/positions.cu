// Learned absolute position embeddings (GPT): the forward add into the embedded rows and the backward sum of the
// rows at each position into the position table's gradient. Each position's rows are summed by one thread per
// column in row order (no atomics), so the gradient's bits do not vary run to run.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::to_bf16;
using detail::to_float;
using detail::from_float;

constexpr int kThreads = 256;

__device__ __forceinline__ std::int64_t position_of(const PositionRun& run, std::int64_t i) {
  return run.first_position + (run.phase + i) % run.period;
}

__global__ void position_forward_kernel(bf16* x, const bf16* table, PositionRun run, std::int64_t cols) {
  const std::int64_t count = run.rows * cols, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < count; e += stride) {
    const std::int64_t i = e / cols, c = e % cols;
    bf16& out = x[(run.first_row + i) * cols + c];
    out = to_bf16(to_float(out) + to_float(table[position_of(run, i) * cols + c]));
  }
}

// Block (x, y): columns [x * blockDim, ...) of the run's k-th distinct position, k = y, y + gridDim.y, ...: the rows
// i = k, k + period, ... all sit at that position.
template <typename G>
__global__ void position_backward_kernel(const bf16* dy, G* grad, PositionRun run, std::int64_t positions,
                                         std::int64_t cols) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  for (std::int64_t k = blockIdx.y; k < positions; k += gridDim.y) {
    float sum = 0.f;
    for (std::int64_t i = k; i < run.rows; i += run.period) sum += to_float(dy[(run.first_row + i) * cols + c]);
    G& g = grad[position_of(run, k) * cols + c];
    g = from_float<G>(to_float(g) + sum);
  }
}

void check(const PositionRun& run, std::int64_t cols) {
  detail::require(run.rows > 0 && cols > 0 && run.period > 0 && run.phase >= 0 && run.first_row >= 0 &&
                      run.first_position >= 0,
                  "position embeddings need rows, cols and period > 0 and non-negative offsets");
}

}  // namespace

void position_embedding_forward(bf16* x, const bf16* table, const PositionRun& run, std::int64_t cols,
                                cudaStream_t stream) {
  check(run, cols);
  position_forward_kernel<<<detail::grid_for(run.rows * cols, kThreads), kThreads, 0, stream>>>(x, table, run, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void position_embedding_backward(const bf16* dy, GradRef grad, const PositionRun& run, std::int64_t cols,
                                 cudaStream_t stream) {
  check(run, cols);
  const std::int64_t positions = run.rows < run.period ? run.rows : run.period;
  const dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
                  static_cast<unsigned>(positions < 65535 ? positions : 65535));
  switch (grad.type) {
    case GradType::bf16:
      position_backward_kernel<<<grid, kThreads, 0, stream>>>(dy, static_cast<bf16*>(grad.data), run, positions, cols);
      break;
    case GradType::f32:
      position_backward_kernel<<<grid, kThreads, 0, stream>>>(dy, static_cast<float*>(grad.data), run, positions,
                                                              cols);
      break;
  }
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
