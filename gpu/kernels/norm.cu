// RMSNorm and LayerNorm: one block per row forward; backward by blocks of rows, each block keeping its
// weight-gradient partial (fp32, in registers or shared memory) so the final reduction over blocks is
// deterministic.
#include <algorithm>

#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

using detail::block_sum;
using detail::to_bf16;
using detail::to_float;
using detail::Float8;
using detail::load8;
using detail::store8;
using detail::unpack8;
using detail::aligned16;

constexpr int kThreads = 256;
// Two blocks of 512 threads per multiprocessor of an H100/H200 (132), one wave: measured on an H200 (2026-11-25),
// a 4096-wide backward took 46.6 us over 4096 rows with 264 blocks against 52.1 with 528 (two waves of blocks
// whose rows each wait on a block-wide sum); the partials (4 bytes per block and column) stay a few percent of
// what backward moves.
constexpr std::int64_t kMaxPartialBlocks = 264;

__global__ void rmsnorm_forward_kernel(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t cols,
                                       float eps) {
  __shared__ float scratch[32];
  const bf16* row = x + blockIdx.x * cols;
  float sum_sq = 0.f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_float(row[c]);
    sum_sq += v * v;
  }
  const float r = rsqrtf(block_sum(sum_sq, scratch) / cols + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[blockIdx.x * cols + c] = to_bf16(to_float(row[c]) * r * to_float(weight[c]));
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// RMSNorm with cols % 8 == 0 and 16-byte aligned rows: each thread takes groups of eight columns (the row is
// read once into registers-worth of 16-byte loads per pass); sums are over the thread's groups, then the block.
__global__ void rmsnorm_forward_vec8_kernel(const bf16* x, const bf16* weight, bf16* y, float* rstd,
                                            std::int64_t cols, float eps) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x * cols;
  float sum_sq = 0.f;
  for (std::int64_t c = 8 * threadIdx.x; c < cols; c += 8 * blockDim.x) {
    const Float8 v = load8(x, row + c);
    for (int k = 0; k < 8; ++k) sum_sq += v.v[k] * v.v[k];
  }
  const float r = rsqrtf(block_sum(sum_sq, scratch) / cols + eps);
  for (std::int64_t c = 8 * threadIdx.x; c < cols; c += 8 * blockDim.x) {
    const Float8 v = load8(x, row + c), w = load8(weight, c);
    Float8 out;
    for (int k = 0; k < 8; ++k) out.v[k] = v.v[k] * r * w.v[k];
    store8(y, row + c, out);
  }
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

__global__ void layernorm_forward_kernel(const bf16* x, const bf16* weight, const bf16* bias, bf16* y, float* mean,
                                         float* rstd, std::int64_t cols, float eps) {
  __shared__ float scratch[32];
  const bf16* row = x + blockIdx.x * cols;
  float sum = 0.f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += to_float(row[c]);
  const float mu = block_sum(sum, scratch) / cols;
  float sum_sq = 0.f;  // two passes: the centred sum of squares does not cancel
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = to_float(row[c]) - mu;
    sum_sq += d * d;
  }
  const float r = rsqrtf(block_sum(sum_sq, scratch) / cols + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[blockIdx.x * cols + c] = to_bf16((to_float(row[c]) - mu) * r * to_float(weight[c]) + to_float(bias[c]));
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = r;
  }
}

// Block b handles rows b, b + gridDim.x, ...; dw (and db) partials of its rows land in partials[b].
// dx = the norm's input gradient, plus `skip` (the residual stream's gradient) where given.
__global__ void rmsnorm_backward_kernel(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd,
                                        const bf16* skip, bf16* dx, float* partials, std::int64_t rows,
                                        std::int64_t cols) {
  extern __shared__ float dw[];
  __shared__ float scratch[32];
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) dw[c] = 0.f;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* dy_row = dy + r * cols;
    const bf16* x_row = x + r * cols;
    const float rs = rstd[r];
    float dot = 0.f;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      dot += to_float(dy_row[c]) * to_float(weight[c]) * to_float(x_row[c]);
    const float coefficient = block_sum(dot, scratch) * rs * rs * rs / cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = to_float(dy_row[c]), xv = to_float(x_row[c]);
      const float added = skip ? to_float(skip[r * cols + c]) : 0.f;
      dx[r * cols + c] = to_bf16(rs * g * to_float(weight[c]) - xv * coefficient + added);
      dw[c] += g * xv * rs;  // column c is always this thread's: no race
    }
  }
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) partials[blockIdx.x * cols + c] = dw[c];
}

// RMSNorm backward with cols % 8 == 0, 16-byte aligned rows and cols <= 8 * kGroups * kThreads: thread t owns the
// column groups 8 (t + g kThreads), g < kGroups, of every row its block takes, so the weight (packed bf16) stays in
// registers for all of them, its rows' dy and x stay in registers between the dot product and dx, its
// weight-gradient partial accumulates in registers, and the next row's loads (dy, x and its rstd) are issued
// before this row's block-wide sum waits (they stay in flight across the barrier). With `skip`, dx adds the
// residual stream's gradient, loaded where dx is stored. kMinBlocks blocks fit on a multiprocessor without
// spilling registers (ptxas -v reports none for the instantiations below).
template <int kGroups, int kThreads, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    rmsnorm_backward_rows_kernel(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd,
                                 const bf16* skip, bf16* dx, float* partials, std::int64_t rows, std::int64_t cols) {
  __shared__ float scratch[32];
  std::int64_t column[kGroups];
  bool owned[kGroups];
  uint4 w_bits[kGroups] = {};
  for (int g = 0; g < kGroups; ++g) {
    column[g] = 8 * (threadIdx.x + static_cast<std::int64_t>(g) * kThreads);
    owned[g] = column[g] < cols;
    if (owned[g]) w_bits[g] = *reinterpret_cast<const uint4*>(weight + column[g]);
  }
  const auto load_row = [&](std::int64_t r, uint4* dy_bits, uint4* x_bits) {
    for (int g = 0; g < kGroups; ++g)
      if (owned[g]) {
        dy_bits[g] = *reinterpret_cast<const uint4*>(dy + r * cols + column[g]);
        x_bits[g] = *reinterpret_cast<const uint4*>(x + r * cols + column[g]);
      }
  };
  float dw[kGroups][8] = {};
  uint4 dy_now[kGroups] = {}, x_now[kGroups] = {}, dy_next[kGroups] = {}, x_next[kGroups] = {};
  float rs_now = 0.f, rs_next = 0.f;
  if (blockIdx.x < rows) {
    load_row(blockIdx.x, dy_now, x_now);
    rs_now = rstd[blockIdx.x];
  }
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (r + gridDim.x < rows) {
      load_row(r + gridDim.x, dy_next, x_next);
      rs_next = rstd[r + gridDim.x];
    }
    const float rs = rs_now;
    float dot = 0.f;
    for (int g = 0; g < kGroups; ++g)
      if (owned[g]) {
        const Float8 gv = unpack8(dy_now[g]), xv = unpack8(x_now[g]), w = unpack8(w_bits[g]);
        for (int k = 0; k < 8; ++k) dot += gv.v[k] * w.v[k] * xv.v[k];
      }
    const float coefficient = block_sum(dot, scratch) * rs * rs * rs / cols;
    for (int g = 0; g < kGroups; ++g) {
      if (!owned[g]) continue;
      const Float8 gv = unpack8(dy_now[g]), xv = unpack8(x_now[g]), w = unpack8(w_bits[g]);
      const Float8 added = skip ? load8(skip, r * cols + column[g]) : Float8{};
      Float8 out;
      for (int k = 0; k < 8; ++k) {
        out.v[k] = rs * gv.v[k] * w.v[k] - xv.v[k] * coefficient + added.v[k];
        dw[g][k] += gv.v[k] * xv.v[k] * rs;
      }
      store8(dx, r * cols + column[g], out);
      dy_now[g] = dy_next[g];
      x_now[g] = x_next[g];
    }
    rs_now = rs_next;
  }
  for (int g = 0; g < kGroups; ++g)
    if (owned[g])
      for (int k = 0; k < 8; ++k) partials[blockIdx.x * cols + column[g] + k] = dw[g][k];
}

__global__ void layernorm_backward_kernel(const bf16* dy, const bf16* x, const bf16* weight, const float* mean,
                                          const float* rstd, bf16* dx, float* partials, std::int64_t rows,
                                          std::int64_t cols) {
  extern __shared__ float shared[];
  float* dw = shared;
  float* db = shared + cols;
  __shared__ float scratch[32];
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) dw[c] = db[c] = 0.f;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const bf16* dy_row = dy + r * cols;
    const bf16* x_row = x + r * cols;
    const float mu = mean[r], rs = rstd[r];
    float sum_g = 0.f, sum_g_xhat = 0.f;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = to_float(dy_row[c]) * to_float(weight[c]);
      sum_g += g;
      sum_g_xhat += g * (to_float(x_row[c]) - mu) * rs;
    }
    const float mean_g = block_sum(sum_g, scratch) / cols;
    const float mean_g_xhat = block_sum(sum_g_xhat, scratch) / cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = to_float(dy_row[c]);
      const float xhat = (to_float(x_row[c]) - mu) * rs;
      dx[r * cols + c] = to_bf16(rs * (d * to_float(weight[c]) - mean_g - xhat * mean_g_xhat));
      dw[c] += d * xhat;
      db[c] += d;
    }
  }
  const std::int64_t blocks = gridDim.x;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    partials[blockIdx.x * cols + c] = dw[c];
    partials[(blocks + blockIdx.x) * cols + c] = db[c];
  }
}

// A block sums 32 columns: warp w adds the partial rows w, w + 8, ... of its lane's column in order, then the
// eight warp sums are added in warp order: a fixed order, so the same bits every run.
constexpr int kReduceWarps = 8;
__global__ void reduce_partials_kernel(const float* partials, std::int64_t blocks, std::int64_t cols, bf16* grad,
                                       bool accumulate) {
  __shared__ float warp_sums[kReduceWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t c = blockIdx.x * 32ll + lane;
  float sum = 0.f;
  if (c < cols)
    for (std::int64_t b = warp; b < blocks; b += kReduceWarps) sum += partials[b * cols + c];
  warp_sums[warp][lane] = sum;
  __syncthreads();
  if (warp != 0 || c >= cols) return;
  float total = 0.f;
  for (int w = 0; w < kReduceWarps; ++w) total += warp_sums[w][lane];
  grad[c] = to_bf16(accumulate ? to_float(grad[c]) + total : total);
}

void check_shape(std::int64_t rows, std::int64_t cols) {
  detail::require(rows > 0 && cols > 0 && rows <= 0x7fffffff, "norm: rows and cols must be positive");
}

template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t bytes) {
  detail::require(bytes <= 227 * 1024, "norm backward: cols too wide for the shared-memory gradient partial");
  TWIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

std::int64_t norm_partial_blocks(std::int64_t rows) { return std::min(rows, kMaxPartialBlocks); }
std::size_t norm_partial_floats(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(norm_partial_blocks(rows) * cols);
}

void rmsnorm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t rows, std::int64_t cols,
                     float eps, cudaStream_t stream) {
  check_shape(rows, cols);
  if (cols % 8 == 0 && aligned16(x) && aligned16(weight) && aligned16(y))
    rmsnorm_forward_vec8_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, y, rstd, cols, eps);
  else
    rmsnorm_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, y, rstd, cols, eps);
  TWIN_CUDA_CHECK_LAUNCH();
}

void layernorm_forward(const bf16* x, const bf16* weight, const bf16* bias, bf16* y, float* mean, float* rstd,
                       std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream) {
  check_shape(rows, cols);
  layernorm_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, bias, y, mean, rstd, cols,
                                                                                eps);
  TWIN_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, const bf16* skip, bf16* dx,
                      float* partials, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  check_shape(rows, cols);
  const std::size_t shared = static_cast<std::size_t>(cols) * sizeof(float);
  const unsigned blocks = static_cast<unsigned>(norm_partial_blocks(rows));
  const bool vector = cols % 8 == 0 && aligned16(dy) && aligned16(x) && aligned16(weight) && aligned16(dx) &&
                      (skip == nullptr || aligned16(skip));
  if (vector && cols <= 8 * 256) {
    rmsnorm_backward_rows_kernel<1, 256, 4><<<blocks, 256, 0, stream>>>(dy, x, weight, rstd, skip, dx, partials, rows,
                                                                        cols);
  } else if (vector && cols <= 8 * 512) {  // one group per thread: a second would spill at 64 registers
    rmsnorm_backward_rows_kernel<1, 512, 2><<<blocks, 512, 0, stream>>>(dy, x, weight, rstd, skip, dx, partials, rows,
                                                                        cols);
  } else if (vector && cols <= 2 * 8 * 512) {  // two groups need more than 64 registers: one block per SM
    rmsnorm_backward_rows_kernel<2, 512, 1><<<blocks, 512, 0, stream>>>(dy, x, weight, rstd, skip, dx, partials, rows,
                                                                        cols);
  } else {
    allow_shared(rmsnorm_backward_kernel, shared);
    rmsnorm_backward_kernel<<<blocks, kThreads, shared, stream>>>(dy, x, weight, rstd, skip, dx, partials, rows, cols);
  }
  TWIN_CUDA_CHECK_LAUNCH();
}

void layernorm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* mean, const float* rstd,
                        bf16* dx, float* partials, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  check_shape(rows, cols);
  const std::size_t shared = 2 * static_cast<std::size_t>(cols) * sizeof(float);
  allow_shared(layernorm_backward_kernel, shared);
  layernorm_backward_kernel<<<static_cast<unsigned>(norm_partial_blocks(rows)), kThreads, shared, stream>>>(
      dy, x, weight, mean, rstd, dx, partials, rows, cols);
  TWIN_CUDA_CHECK_LAUNCH();
}

void norm_weight_grad_reduce(const float* partials, std::int64_t partial_blocks, std::int64_t cols, bf16* grad,
                             bool accumulate, cudaStream_t stream) {
  check_shape(partial_blocks, cols);
  reduce_partials_kernel<<<static_cast<unsigned>((cols + 31) / 32), 32 * kReduceWarps, 0, stream>>>(
      partials, partial_blocks, cols, grad, accumulate);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
