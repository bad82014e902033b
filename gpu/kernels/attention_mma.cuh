// Tensor-core pieces of the attention kernels: cp.async tile copies into padded shared memory, ldmatrix
// fragment loads and mma.sync m16n8k16 (bf16 in, fp32 accumulate), in the PTX ISA's fragment layout:
// lane = 4 g + t; a 16x8 C fragment holds rows g and g + 8, columns 2t and 2t + 1.
#pragma once
#include "gpu/kernels/attention_tile.cuh"

namespace twin::kernels::detail {

constexpr int kPad = 8;  // bf16 of padding per shared row: the 8 rows of one ldmatrix fall in distinct banks

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// tile[r][c] = src row (token0 + r) of head `head`, r < ROWS, by 16-byte cp.async copies issued by the
// whole block; rows at or past seq_end are zero-filled. The caller commits and waits.
template <int ROWS, int D>
__device__ __forceinline__ void async_load_rows(bf16 (*tile)[D + kPad], const bf16* src, std::int64_t token0,
                                                std::int64_t seq_end, std::int64_t row_stride, int head) {
  constexpr int kChunksPerRow = D / 8;
  for (int chunk = threadIdx.x; chunk < ROWS * kChunksPerRow; chunk += blockDim.x) {
    const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * 8;
    const bool inside = token0 + r < seq_end;
    const bf16* from = src + (inside ? token0 + r : 0) * row_stride + static_cast<std::int64_t>(head) * D + c;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(&tile[r][c])), "l"(from),
                 "r"(inside ? 16 : 0));
  }
}
__device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most PENDING of this thread's committed copy groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

using Fragment = std::uint32_t[4];

__device__ __forceinline__ void ldmatrix_x4(Fragment& r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(Fragment& r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// A operand: rows row0 .. row0 + 15, columns k0 .. k0 + 15 of a row-major [m][k] tile.
template <int D>
__device__ __forceinline__ void load_a(Fragment& a, const bf16 (*tile)[D + kPad], int row0, int k0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4(a, &tile[row0 + lane % 16][k0 + (lane / 16) * 8]);
}
// B operands of two n-blocks (n0 .. n0 + 7 in b[0..1], n0 + 8 .. n0 + 15 in b[2..3]), k0 .. k0 + 15,
// from a tile stored [n][k] (B = tile^T: keys against d in Q K^T).
template <int D>
__device__ __forceinline__ void load_b_nk(Fragment& b, const bf16 (*tile)[D + kPad], int n0, int k0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4(b, &tile[n0 + lane % 8 + (lane / 16) * 8][k0 + ((lane / 8) % 2) * 8]);
}
// The same from a tile stored [k][n] (B = tile: V in P V).
template <int D>
__device__ __forceinline__ void load_b_kn(Fragment& b, const bf16 (*tile)[D + kPad], int k0, int n0) {
  const int lane = threadIdx.x % 32;
  ldmatrix_x4_trans(b, &tile[k0 + lane % 8 + ((lane / 8) % 2) * 8][n0 + (lane / 16) * 8]);
}

// c (16x8 fp32) += a (16x16 bf16, row-major) * b (16x8 bf16, column-major).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const Fragment& a, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}
// The C fragments of two adjacent 16x8 blocks, rounded to bf16, as the A fragment of their 16x16 block.
__device__ __forceinline__ void a_from_c(Fragment& a, const float (&left)[4], const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

}  // namespace twin::kernels::detail
