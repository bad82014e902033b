// RMSNorm over head-wide rows (QK-norm's: 32-256 columns): `kLanes` lanes per row, eight columns a lane (one 16-byte
// access), the row's sum of squares or dot product by shuffles among its lanes. The block-per-row kernels of wide rows
// left such a row to one warp that waited on a block-wide sum per row and kept a few hundred bytes in flight per
// multiprocessor: QK-norm's backward ran at about a twentieth of HBM bandwidth on an H200 (docs/ACCURACY.md,
// "Qwen3-MoE and DeepSeek-V3 shapes on one H200").
#include <type_traits>

#include "gpu/kernels/common.cuh"
#include "gpu/kernels/norm_rows.cuh"

namespace twin::kernels::detail {
namespace {

constexpr int kThreads = 256;
// Rows each lane group loads before it reduces any: with two blocks per multiprocessor (the backward's grid is the
// partial blocks, two per multiprocessor of an H100/H200) that keeps 512 x 4 x 32 bytes in flight per multiprocessor.
constexpr int kUnroll = 4;

template <int kLanes>
__device__ __forceinline__ float lanes_sum(float v) {
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One row per lane group, one pass: every lane takes part in the shuffles, rows past the end with zeros.
template <int kLanes>
__global__ void __launch_bounds__(kThreads)
    rmsnorm_forward_narrow_kernel(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t rows,
                                  std::int64_t cols, float eps, NormRowLayout layout, NormWeightRows weights) {
  const std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x) / kLanes;
  const std::int64_t c = 8 * (threadIdx.x % kLanes);
  const bool owned = r < rows && c < cols;
  const std::int64_t start = r < rows ? row_start(r, cols, layout) : 0;
  const Float8 v = owned ? load8(x, start + c) : Float8{};
  float sum_sq = 0.f;
  for (int k = 0; k < 8; ++k) sum_sq += v.v[k] * v.v[k];
  const float rs = rsqrtf(lanes_sum<kLanes>(sum_sq) / cols + eps);
  if (!owned) return;
  const Float8 w = load8(weight, weight_row(r, weights) * cols + c);
  Float8 out;
  for (int k = 0; k < 8; ++k) out.v[k] = v.v[k] * rs * w.v[k];
  store8(y, start + c, out);
  if (c == 0) rstd[r] = rs;
}

// Block b's lane group g takes rows b * groups + g + i * (grid * groups), kUnroll of them loaded before any is
// reduced; its weight-gradient sums stay in registers (one set per weight), then the block adds its groups' in
// group order into its partial: a fixed order, the same bits every run.
template <int kLanes>
__global__ void __launch_bounds__(kThreads, 2)
    rmsnorm_backward_narrow_kernel(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd,
                                   const bf16* skip, bf16* dx, float* partials, std::int64_t rows, std::int64_t cols,
                                   NormRowLayout x_layout, NormRowLayout grad_layout, NormWeightRows weights) {
  constexpr int kGroups = kThreads / kLanes;
  __shared__ float group_dw[kGroups][2 * 8 * kLanes];
  const int group = threadIdx.x / kLanes;
  const std::int64_t c = 8 * (threadIdx.x % kLanes);
  const bool column = c < cols;
  const int weights_used = weight_count(weights);
  Float8 w[2] = {};
  for (int i = 0; i < weights_used; ++i) w[i] = column ? load8(weight, i * cols + c) : Float8{};
  float dw[2][8] = {};
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kGroups;
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kGroups + group; first - group < rows;
       first += kUnroll * stride) {
    uint4 g[kUnroll], xv[kUnroll], sv[kUnroll];
    float rs[kUnroll];
    std::int64_t g_start[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t r = first + u * stride;
      const bool live = r < rows && column;
      g_start[u] = live ? row_start(r, cols, grad_layout) : 0;
      const std::int64_t x_start = live ? row_start(r, cols, x_layout) : 0;
      g[u] = live ? *reinterpret_cast<const uint4*>(dy + g_start[u] + c) : uint4{};
      xv[u] = live ? *reinterpret_cast<const uint4*>(x + x_start + c) : uint4{};
      sv[u] = live && skip ? *reinterpret_cast<const uint4*>(skip + g_start[u] + c) : uint4{};
      rs[u] = r < rows ? rstd[r] : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t r = first + u * stride;
      const int second = r < rows ? weight_row(r, weights) : 0;
      const Float8 gv = unpack8(g[u]), xf = unpack8(xv[u]), added = unpack8(sv[u]);
      Float8 wv;
      for (int k = 0; k < 8; ++k) wv.v[k] = second ? w[1].v[k] : w[0].v[k];
      float dot = 0.f;
      for (int k = 0; k < 8; ++k) dot += gv.v[k] * wv.v[k] * xf.v[k];
      const float coefficient = lanes_sum<kLanes>(dot) * rs[u] * rs[u] * rs[u] / cols;
      if (!(r < rows && column)) continue;
      Float8 out;
      for (int k = 0; k < 8; ++k) {
        out.v[k] = rs[u] * gv.v[k] * wv.v[k] - xf.v[k] * coefficient + added.v[k];
        const float d = gv.v[k] * xf.v[k] * rs[u];
        if (second) dw[1][k] += d; else dw[0][k] += d;
      }
      store8(dx, g_start[u] + c, out);
    }
  }
  if (column)
    for (int i = 0; i < weights_used; ++i)
      for (int k = 0; k < 8; ++k) group_dw[group][i * cols + c + k] = dw[i][k];
  __syncthreads();
  const std::int64_t width = weights_used * cols;
  for (std::int64_t j = threadIdx.x; j < width; j += kThreads) {
    float sum = 0.f;
    for (int s = 0; s < kGroups; ++s) sum += group_dw[s][j];
    partials[blockIdx.x * width + j] = sum;
  }
}

// The lane count of a row: eight columns a lane, a power of two (a shuffle group), 4 to 32.
template <typename Launch>
void with_lanes(std::int64_t cols, Launch&& launch) {
  require(cols > 0 && cols <= kNarrowMaxCols && cols % 8 == 0, "norm: narrow rows of 8 to 256 columns, 8 a lane");
  if (cols <= 32) return launch(std::integral_constant<int, 4>{});
  if (cols <= 64) return launch(std::integral_constant<int, 8>{});
  if (cols <= 128) return launch(std::integral_constant<int, 16>{});
  return launch(std::integral_constant<int, 32>{});
}

}  // namespace

void rmsnorm_forward_narrow(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t rows,
                            std::int64_t cols, float eps, NormRowLayout layout, NormWeightRows weights,
                            cudaStream_t stream) {
  with_lanes(cols, [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    const std::int64_t blocks = (rows * kLanes + kThreads - 1) / kThreads;
    require(blocks <= 0x7fffffff, "norm: too many rows for one launch");
    rmsnorm_forward_narrow_kernel<kLanes><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
        x, weight, y, rstd, rows, cols, eps, layout, weights);
  });
  TWIN_CUDA_CHECK_LAUNCH();
}

void rmsnorm_backward_narrow(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, const bf16* skip,
                             bf16* dx, float* partials, std::int64_t partial_blocks, std::int64_t rows,
                             std::int64_t cols, NormRowLayout x_layout, NormRowLayout grad_layout,
                             NormWeightRows weights, cudaStream_t stream) {
  with_lanes(cols, [&](auto lanes) {
    constexpr int kLanes = decltype(lanes)::value;
    rmsnorm_backward_narrow_kernel<kLanes><<<static_cast<unsigned>(partial_blocks), kThreads, 0, stream>>>(
        dy, x, weight, rstd, skip, dx, partials, rows, cols, x_layout, grad_layout, weights);
  });
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels::detail
