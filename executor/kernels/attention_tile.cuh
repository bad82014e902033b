// Pieces shared by the attention kernels: tile loads from the strided [tokens, heads, head_dim] layout
// into shared memory, and the reduction of a dot product split over the threads of one row group.
#pragma once
#include "executor/kernels/common.cuh"

namespace twin::kernels::detail {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// tile[r][d] = src[(token0 + r) * row_stride + head * D + d] for r < ROWS, zero for tokens >= seq_end.
// 16-byte loads: the launcher checks that D, the row strides and the pointers allow them.
template <int ROWS, int D>
__device__ __forceinline__ void load_tile(bf16 (*tile)[D], const bf16* src, std::int64_t token0, std::int64_t seq_end,
                                          std::int64_t row_stride, int head) {
  constexpr int kChunksPerRow = D / 8;
  for (int chunk = threadIdx.x; chunk < ROWS * kChunksPerRow; chunk += blockDim.x) {
    const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (token0 + r < seq_end)
      value = *reinterpret_cast<const uint4*>(src + (token0 + r) * row_stride + static_cast<std::int64_t>(head) * D + c);
    *reinterpret_cast<uint4*>(&tile[r][c]) = value;
  }
}

// Fills in contiguous strides (a stride of 0) and rejects shapes and layouts the kernels cannot run.
void check_attention_dims(AttentionDims& dims, const void* q, const void* k, const void* v);

// Sum over the GROUP consecutive lanes that share one row (GROUP a power of two <= 32).
template <int GROUP>
__device__ __forceinline__ float group_sum(float v) {
  for (int offset = GROUP / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace twin::kernels::detail
