// Where an RMSNorm's row lies and which weight scales it (kernels.hpp's NormRowLayout and NormWeightRows), shared by
// the norm kernels of every width; and the launchers of the head-wide ones (norm_narrow.cu).
#pragma once
#include <cstdint>

#include "gpu/kernels.hpp"

namespace twin::kernels::detail {

// The first element of row r under `layout`.
__device__ __forceinline__ std::int64_t row_start(std::int64_t r, std::int64_t cols, NormRowLayout layout) {
  if (layout.group_rows == 0) return r * cols;
  return (r / layout.group_rows) * layout.group_stride + (r % layout.group_rows) * cols;
}
// 1 or 2 (NormWeightRows::weight_count, which host code calls).
__device__ __forceinline__ int weight_count(NormWeightRows weights) { return weights.period == 0 ? 1 : 2; }
// 0 or 1: the weight row that scales row r.
__device__ __forceinline__ int weight_row(std::int64_t r, NormWeightRows weights) {
  return weights.period != 0 && r % weights.period >= weights.second_from ? 1 : 0;
}

// Head-wide rows (cols <= kNarrowMaxCols, cols % 8 == 0, every row and pointer 16-byte aligned): a few lanes of a
// warp per row, so that a block's warps work on many rows at once with no block-wide sum between them.
constexpr std::int64_t kNarrowMaxCols = 256;
void rmsnorm_forward_narrow(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t rows,
                            std::int64_t cols, float eps, NormRowLayout layout, NormWeightRows weights,
                            cudaStream_t stream);
// `partial_blocks` blocks, each writing weights.weight_count() * cols partials.
void rmsnorm_backward_narrow(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, const bf16* skip,
                             bf16* dx, float* partials, std::int64_t partial_blocks, std::int64_t rows,
                             std::int64_t cols, NormRowLayout x_layout, NormRowLayout grad_layout,
                             NormWeightRows weights, cudaStream_t stream);

}  // namespace twin::kernels::detail
