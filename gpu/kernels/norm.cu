// RMSNorm and LayerNorm: one block per row forward; backward by blocks of rows, each block keeping its
// weight-gradient partial (fp32, in registers or shared memory) so the final reduction over blocks is
// deterministic. The vector RMSNorm backward stages its rows through shared memory a few rows ahead.
#include <algorithm>

#include <cuda_pipeline.h>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/norm_rows.cuh"

namespace twin::kernels {
namespace {

using detail::block_sum;
using detail::to_bf16;
using detail::to_float;
using detail::from_float;
using detail::Float8;
using detail::load8;
using detail::store8;
using detail::unpack8;
using detail::aligned16;
using detail::row_start;
using detail::weight_row;

constexpr int kThreads = 256;
// Two blocks per multiprocessor of an H100/H200 (132), one wave: each block's rows wait on a block-wide sum, and
// more blocks (396, 528) timed slower on an H200 (2026-11-25); the partials (4 bytes per block and column) stay a
// few percent of what backward moves.
constexpr std::int64_t kMaxPartialBlocks = 264;

__global__ void rmsnorm_forward_kernel(const bf16* x, const bf16* weights, bf16* y, float* rstd, std::int64_t cols,
                                       float eps, NormRowLayout layout, NormWeightRows weight_rows) {
  __shared__ float scratch[32];
  const std::int64_t start = row_start(blockIdx.x, cols, layout);
  const bf16* weight = weights + weight_row(blockIdx.x, weight_rows) * cols;
  const bf16* row = x + start;
  float sum_sq = 0.f;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_float(row[c]);
    sum_sq += v * v;
  }
  const float r = rsqrtf(block_sum(sum_sq, scratch) / cols + eps);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[start + c] = to_bf16(to_float(row[c]) * r * to_float(weight[c]));
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// RMSNorm with cols % 8 == 0 and 16-byte aligned rows: each thread takes groups of eight columns (the row is
// read once into registers-worth of 16-byte loads per pass); sums are over the thread's groups, then the block.
__global__ void rmsnorm_forward_vec8_kernel(const bf16* x, const bf16* weights, bf16* y, float* rstd,
                                            std::int64_t cols, float eps, NormRowLayout layout,
                                            NormWeightRows weight_rows) {
  __shared__ float scratch[32];
  const std::int64_t row = row_start(blockIdx.x, cols, layout);
  const bf16* weight = weights + weight_row(blockIdx.x, weight_rows) * cols;
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
// With two weights (weight_rows) dw holds both columns' sums, the second weight's after the first's.
__global__ void rmsnorm_backward_kernel(const bf16* dy, const bf16* x, const bf16* weights, const float* rstd,
                                        const bf16* skip, bf16* dx, float* partials, std::int64_t rows,
                                        std::int64_t cols, NormRowLayout x_layout, NormRowLayout grad_layout,
                                        NormWeightRows weight_rows) {
  extern __shared__ float dw_both[];
  __shared__ float scratch[32];
  const std::int64_t width = detail::weight_count(weight_rows) * cols;
  for (std::int64_t c = threadIdx.x; c < width; c += blockDim.x) dw_both[c] = 0.f;
  __syncthreads();  // with two weights a thread adds to columns another zeroed (and writes out)
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t second = weight_row(r, weight_rows);
    const bf16* weight = weights + second * cols;
    float* dw = dw_both + second * cols;
    const std::int64_t g_start = row_start(r, cols, grad_layout);
    const bf16* dy_row = dy + g_start;
    const bf16* x_row = x + row_start(r, cols, x_layout);
    const float rs = rstd[r];
    float dot = 0.f;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      dot += to_float(dy_row[c]) * to_float(weight[c]) * to_float(x_row[c]);
    const float coefficient = block_sum(dot, scratch) * rs * rs * rs / cols;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float g = to_float(dy_row[c]), xv = to_float(x_row[c]);
      const float added = skip ? to_float(skip[g_start + c]) : 0.f;
      dx[g_start + c] = to_bf16(rs * g * to_float(weight[c]) - xv * coefficient + added);
      dw[c] += g * xv * rs;  // column c is always this thread's: no race
    }
  }
  __syncthreads();
  for (std::int64_t c = threadIdx.x; c < width; c += blockDim.x) partials[blockIdx.x * width + c] = dw_both[c];
}

// RMSNorm backward with cols % 8 == 0, 16-byte aligned rows and cols <= 8 * kGroups * kThreads: thread t owns the
// column groups 8 (t + g kThreads), g < kGroups, of every row its block takes. A row's dy and x (and skip) are copied
// into shared memory by the thread that will read them (16-byte cp.async, __pipeline_memcpy_async), kStages - 1 rows
// ahead, so the copies stay in flight across the block-wide sum each row waits on: at one row in flight (the form
// before, revision 3) the kernel reached 45-55% of HBM on an H200 / H100. Only the copying thread reads its slots,
// so a stage needs no barrier of its own, only __pipeline_wait_prior. The weight stays in registers (packed bf16),
// and so does the weight-gradient partial.
template <int kGroups, int kThreads, int kStages>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_backward_staged_kernel(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd,
                                   const bf16* skip, bf16* dx, float* partials, std::int64_t rows, std::int64_t cols,
                                   NormRowLayout x_layout, NormRowLayout grad_layout) {
  extern __shared__ uint4 staged[];  // [kStages][arrays][kGroups][kThreads] rows, then [kStages][kThreads] rstd
  __shared__ float scratch[32];
  const int arrays = skip ? 3 : 2;
  const auto slot = [&](int stage, int array, int g) {
    return staged + ((stage * arrays + array) * kGroups + g) * kThreads + threadIdx.x;
  };
  float* const staged_rstd = reinterpret_cast<float*>(staged + kStages * arrays * kGroups * kThreads);
  const auto rstd_slot = [&](int stage) { return staged_rstd + stage * kThreads + threadIdx.x; };
  std::int64_t column[kGroups];
  bool owned[kGroups];
  uint4 w_bits[kGroups] = {};
  for (int g = 0; g < kGroups; ++g) {
    column[g] = 8 * (threadIdx.x + static_cast<std::int64_t>(g) * kThreads);
    owned[g] = column[g] < cols;
    if (owned[g]) w_bits[g] = *reinterpret_cast<const uint4*>(weight + column[g]);
  }
  const auto copy_row = [&](std::int64_t r, int stage) {
    if (r < rows) {
      __pipeline_memcpy_async(rstd_slot(stage), rstd + r, 4);  // each thread its own copy: no barrier
      const std::int64_t g_start = row_start(r, cols, grad_layout), x_start = row_start(r, cols, x_layout);
      for (int g = 0; g < kGroups; ++g)
        if (owned[g]) {
          __pipeline_memcpy_async(slot(stage, 0, g), dy + g_start + column[g], 16);
          __pipeline_memcpy_async(slot(stage, 1, g), x + x_start + column[g], 16);
          if (skip) __pipeline_memcpy_async(slot(stage, 2, g), skip + g_start + column[g], 16);
        }
    }
    __pipeline_commit();  // an empty group past the last row keeps the count that wait_prior relies on
  };
  for (int s = 0; s < kStages - 1; ++s) copy_row(blockIdx.x + static_cast<std::int64_t>(s) * gridDim.x, s);
  float dw[kGroups][8] = {};
  int stage = 0;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    copy_row(r + static_cast<std::int64_t>(kStages - 1) * gridDim.x, (stage + kStages - 1) % kStages);
    __pipeline_wait_prior(kStages - 1);
    const float rs = *rstd_slot(stage);
    float dot = 0.f;
    for (int g = 0; g < kGroups; ++g)
      if (owned[g]) {
        const Float8 gv = unpack8(*slot(stage, 0, g)), xv = unpack8(*slot(stage, 1, g)), w = unpack8(w_bits[g]);
        for (int k = 0; k < 8; ++k) dot += gv.v[k] * w.v[k] * xv.v[k];
      }
    const float coefficient = block_sum(dot, scratch) * rs * rs * rs / cols;
    for (int g = 0; g < kGroups; ++g) {
      if (!owned[g]) continue;
      const Float8 gv = unpack8(*slot(stage, 0, g)), xv = unpack8(*slot(stage, 1, g)), w = unpack8(w_bits[g]);
      const Float8 added = skip ? unpack8(*slot(stage, 2, g)) : Float8{};
      Float8 out;
      for (int k = 0; k < 8; ++k) {
        out.v[k] = rs * gv.v[k] * w.v[k] - xv.v[k] * coefficient + added.v[k];
        dw[g][k] += gv.v[k] * xv.v[k] * rs;
      }
      store8(dx, row_start(r, cols, grad_layout) + column[g], out);
    }
    stage = (stage + 1) % kStages;
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
template <typename G>
__global__ void reduce_partials_kernel(const float* partials, std::int64_t blocks, std::int64_t cols, G* grad,
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
  grad[c] = from_float<G>(accumulate ? to_float(grad[c]) + total : total);
}

void check_shape(std::int64_t rows, std::int64_t cols) {
  detail::require(rows > 0 && cols > 0 && rows <= 0x7fffffff, "norm: rows and cols must be positive");
}

void check_layout(NormRowLayout layout, std::int64_t cols) {
  detail::require(layout.group_rows >= 0 && (layout.group_rows == 0 || layout.group_stride >= layout.group_rows * cols),
                  "norm: a row group must fit in its stride");
}
void check_weights(NormWeightRows weights) {
  detail::require(weights.period == 0 || (weights.second_from > 0 && weights.second_from < weights.period),
                  "norm: two weights need rows of each in every period");
}
// Eight-column groups read and written 16 bytes at a time: every row start a multiple of eight elements.
bool vector_rows(NormRowLayout layout, std::int64_t cols) { return cols % 8 == 0 && layout.group_stride % 8 == 0; }

template <typename Kernel>
void allow_shared(Kernel kernel, std::size_t bytes) {
  detail::require(bytes <= 227 * 1024, "norm backward: cols too wide for the shared memory it needs");
  TWIN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

std::int64_t norm_partial_blocks(std::int64_t rows) { return std::min(rows, kMaxPartialBlocks); }
std::size_t norm_partial_floats(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(norm_partial_blocks(rows) * cols);
}

void rmsnorm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t rows, std::int64_t cols,
                     float eps, NormRowLayout layout, NormWeightRows weights, cudaStream_t stream) {
  check_shape(rows, cols);
  check_layout(layout, cols);
  check_weights(weights);
  const bool vector = vector_rows(layout, cols) && aligned16(x) && aligned16(weight) && aligned16(y);
  if (vector && cols <= detail::kNarrowMaxCols)
    return detail::rmsnorm_forward_narrow(x, weight, y, rstd, rows, cols, eps, layout, weights, stream);
  // A row of at most 256 columns that is not vector-aligned is one warp's: a block of kThreads would leave seven of
  // its eight warps idle and wait on them at the block-wide sum.
  const int threads = cols <= 8 * 32 ? 32 : kThreads;
  if (vector)
    rmsnorm_forward_vec8_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, weight, y, rstd, cols, eps,
                                                                                     layout, weights);
  else
    rmsnorm_forward_kernel<<<static_cast<unsigned>(rows), threads, 0, stream>>>(x, weight, y, rstd, cols, eps, layout,
                                                                                weights);
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
                      float* partials, std::int64_t rows, std::int64_t cols, NormRowLayout x_layout,
                      NormRowLayout grad_layout, NormWeightRows weights, cudaStream_t stream) {
  check_shape(rows, cols);
  check_layout(x_layout, cols);
  check_layout(grad_layout, cols);
  check_weights(weights);
  const std::size_t shared = static_cast<std::size_t>(weights.weight_count() * cols) * sizeof(float);
  const unsigned blocks = static_cast<unsigned>(norm_partial_blocks(rows));
  const bool vector = vector_rows(x_layout, cols) && vector_rows(grad_layout, cols) && aligned16(dy) &&
                      aligned16(x) && aligned16(weight) && aligned16(dx) && (skip == nullptr || aligned16(skip));
  const auto launch_staged = [&](auto kernel, int groups, int threads, int stages) {
    const int arrays = skip ? 3 : 2;
    const std::size_t staged =
        static_cast<std::size_t>(stages) * threads * (arrays * groups * sizeof(uint4) + sizeof(float));
    allow_shared(kernel, staged);
    kernel<<<blocks, threads, staged, stream>>>(dy, x, weight, rstd, skip, dx, partials, rows, cols, x_layout,
                                                grad_layout);
  };
  // Launch shapes timed on an H200 (2026-11-25, 2048-8192 columns, 4096 and 8192 rows, with and without skip):
  // 256 threads beat 512 or 1024 (a block-wide sum over fewer warps per row), three stages beat two or four, and
  // 264 blocks (two per multiprocessor) beat 396 or 528.
  // A head-wide row (QK-norm's) is a few lanes' (norm_narrow.cu); two weights in one launch take the narrow or the
  // scalar kernel.
  if (vector && cols <= detail::kNarrowMaxCols) {
    detail::rmsnorm_backward_narrow(dy, x, weight, rstd, skip, dx, partials, blocks, rows, cols, x_layout, grad_layout,
                                    weights, stream);
  } else if (vector && weights.period == 0 && cols <= 8 * 256) {
    launch_staged(rmsnorm_backward_staged_kernel<1, 256, 3>, 1, 256, 3);
  } else if (vector && weights.period == 0 && cols <= 2 * 8 * 256) {
    launch_staged(rmsnorm_backward_staged_kernel<2, 256, 3>, 2, 256, 3);
  } else if (vector && weights.period == 0 && cols <= 4 * 8 * 256) {
    launch_staged(rmsnorm_backward_staged_kernel<4, 256, 3>, 4, 256, 3);
  } else {
    allow_shared(rmsnorm_backward_kernel, shared);
    rmsnorm_backward_kernel<<<blocks, kThreads, shared, stream>>>(dy, x, weight, rstd, skip, dx, partials, rows, cols,
                                                                  x_layout, grad_layout, weights);
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

void norm_weight_grad_reduce(const float* partials, std::int64_t partial_blocks, std::int64_t cols, GradRef grad,
                             bool accumulate, cudaStream_t stream) {
  check_shape(partial_blocks, cols);
  const auto grid = static_cast<unsigned>((cols + 31) / 32);
  switch (grad.type) {
    case GradType::bf16:
      reduce_partials_kernel<<<grid, 32 * kReduceWarps, 0, stream>>>(partials, partial_blocks, cols,
                                                                     static_cast<bf16*>(grad.data), accumulate);
      break;
    case GradType::f32:
      reduce_partials_kernel<<<grid, 32 * kReduceWarps, 0, stream>>>(partials, partial_blocks, cols,
                                                                     static_cast<float*>(grad.data), accumulate);
      break;
  }
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
