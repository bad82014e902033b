// Flash-style attention backward without atomics (deterministic), in three kernels:
//   delta[row] = rowsum(dO * O);
//   dK, dV by blocks of 32 keys (8 threads per key), looping over the query heads of the key's GQA
//   group and over the query tiles that can see the keys, recomputing P from the stored logsumexp;
//   dQ by blocks of 64 query rows (4 threads per row), looping over key tiles, as the forward does.
// Recomputing P in both passes costs one more QK^T than FlashAttention-2's atomic dQ, and keeps the
// result the same bits every run. Plain fp32 FMA arithmetic (no tensor cores).
#include "executor/kernels/attention_tile.cuh"

namespace twin::kernels {
namespace {

using namespace detail;

__global__ void delta_kernel(const bf16* o, const bf16* dout, float* delta, AttentionDims dims) {
  // One warp per (token, head) row; o and dout are contiguous [tokens, heads, head_dim].
  const std::int64_t warp = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const std::int64_t rows = dims.batch * dims.seq * dims.heads;
  if (warp >= rows) return;
  const std::int64_t token = warp / dims.heads;
  const int head = static_cast<int>(warp % dims.heads);
  const bf16* o_row = o + warp * dims.head_dim;
  const bf16* d_row = dout + warp * dims.head_dim;
  float sum = 0.f;
  for (int d = lane; d < dims.head_dim; d += 32) sum += to_float(o_row[d]) * to_float(d_row[d]);
  sum = warp_sum(sum);
  const std::int64_t batch = token / dims.seq, position = token % dims.seq;
  if (lane == 0) delta[(batch * dims.heads + head) * dims.seq + position] = sum;
}

constexpr int kKeyRows = 32;          // keys per block of the dK/dV kernel
constexpr int kKeyThreads = 8;        // threads per key
constexpr int kQueryTile = 32;        // query rows per shared-memory tile of the dK/dV kernel
constexpr int kKvThreads = kKeyRows * kKeyThreads;

template <int D>
__global__ void __launch_bounds__(kKvThreads) dkdv_kernel(const bf16* q, const bf16* k, const bf16* v,
                                                          const bf16* dout, const float* lse, const float* delta,
                                                          bf16* dk, bf16* dv, AttentionDims dims) {
  constexpr int kSlice = D / kKeyThreads;  // d = t + 8 i
  __shared__ __align__(16) bf16 q_tile[kQueryTile][D];
  __shared__ __align__(16) bf16 do_tile[kQueryTile][D];
  __shared__ float lse_tile[kQueryTile], delta_tile[kQueryTile];
  const int kv_head = blockIdx.y, batch = blockIdx.z;
  const int t = threadIdx.x % kKeyThreads;
  const std::int64_t key = static_cast<std::int64_t>(blockIdx.x) * kKeyRows + threadIdx.x / kKeyThreads;
  const bool valid_key = key < dims.seq;
  const std::int64_t token0 = static_cast<std::int64_t>(batch) * dims.seq;
  const float scale = rsqrtf(static_cast<float>(D));
  const float scale_log2 = scale * kLog2e;

  float k_slice[kSlice], v_slice[kSlice], dk_acc[kSlice], dv_acc[kSlice];
  const std::int64_t kv_offset = (token0 + (valid_key ? key : 0)) * dims.kv_row_stride + static_cast<std::int64_t>(kv_head) * D;
#pragma unroll
  for (int i = 0; i < kSlice; ++i) {
    k_slice[i] = valid_key ? to_float(k[kv_offset + t + kKeyThreads * i]) : 0.f;
    v_slice[i] = valid_key ? to_float(v[kv_offset + t + kKeyThreads * i]) : 0.f;
    dk_acc[i] = dv_acc[i] = 0.f;
  }
  const int group = dims.heads / dims.kv_heads;
  const std::int64_t first_key = static_cast<std::int64_t>(blockIdx.x) * kKeyRows;
  const std::int64_t query_start = dims.causal ? first_key / kQueryTile * kQueryTile : 0;
  const std::int64_t out_stride = static_cast<std::int64_t>(dims.heads) * D;  // dout is contiguous
  for (int g = 0; g < group; ++g) {
    const int head = kv_head * group + g;
    const float* lse_row = lse + (static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq;
    const float* delta_row = delta + (static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq;
    for (std::int64_t query0 = query_start; query0 < dims.seq; query0 += kQueryTile) {
      load_tile<kQueryTile, D>(q_tile, q + token0 * dims.q_row_stride, query0, dims.seq, dims.q_row_stride, head);
      load_tile<kQueryTile, D>(do_tile, dout + token0 * out_stride, query0, dims.seq, out_stride, head);
      if (threadIdx.x < kQueryTile) {
        const std::int64_t row = query0 + threadIdx.x;
        lse_tile[threadIdx.x] = row < dims.seq ? lse_row[row] * kLog2e : INFINITY;
        delta_tile[threadIdx.x] = row < dims.seq ? delta_row[row] : 0.f;
      }
      __syncthreads();
      for (int r = 0; r < kQueryTile; ++r) {
        const std::int64_t row = query0 + r;
        float s = 0.f, dp = 0.f;
#pragma unroll
        for (int i = 0; i < kSlice; ++i) {
          s += k_slice[i] * to_float(q_tile[r][t + kKeyThreads * i]);
          dp += v_slice[i] * to_float(do_tile[r][t + kKeyThreads * i]);
        }
        s = group_sum<kKeyThreads>(s);
        dp = group_sum<kKeyThreads>(dp);
        const bool masked = !valid_key || row >= dims.seq || (dims.causal && key > row);
        const float p = masked ? 0.f : exp2f(s * scale_log2 - lse_tile[r]);
        const float ds = p * (dp - delta_tile[r]);
#pragma unroll
        for (int i = 0; i < kSlice; ++i) {
          dv_acc[i] += p * to_float(do_tile[r][t + kKeyThreads * i]);
          dk_acc[i] += ds * to_float(q_tile[r][t + kKeyThreads * i]);
        }
      }
      __syncthreads();
    }
  }
  if (!valid_key) return;
#pragma unroll
  for (int i = 0; i < kSlice; ++i) {
    dk[kv_offset + t + kKeyThreads * i] = to_bf16(dk_acc[i] * scale);
    dv[kv_offset + t + kKeyThreads * i] = to_bf16(dv_acc[i]);
  }
}

constexpr int kQueryRows = 64;        // query rows per block of the dQ kernel
constexpr int kRowThreads = 4;
constexpr int kKeyTile = 32;
constexpr int kDqThreads = kQueryRows * kRowThreads;

template <int D>
__global__ void __launch_bounds__(kDqThreads) dq_kernel(const bf16* q, const bf16* k, const bf16* v,
                                                        const bf16* dout, const float* lse, const float* delta,
                                                        bf16* dq, AttentionDims dims) {
  constexpr int kSlice = D / kRowThreads;  // d = t + 4 i
  __shared__ __align__(16) bf16 k_tile[kKeyTile][D];
  __shared__ __align__(16) bf16 v_tile[kKeyTile][D];
  const int block_rows = static_cast<int>((dims.seq + kQueryRows - 1) / kQueryRows);
  const int q_block = dims.causal ? block_rows - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (dims.heads / dims.kv_heads);
  const int t = threadIdx.x % kRowThreads;
  const std::int64_t row = static_cast<std::int64_t>(q_block) * kQueryRows + threadIdx.x / kRowThreads;
  const bool valid_row = row < dims.seq;
  const std::int64_t token0 = static_cast<std::int64_t>(batch) * dims.seq;
  const float scale = rsqrtf(static_cast<float>(D));
  const float scale_log2 = scale * kLog2e;
  const std::int64_t safe_row = valid_row ? row : 0;
  const std::int64_t stat = (static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq + safe_row;
  const float row_lse = lse[stat] * kLog2e, row_delta = delta[stat];

  float q_slice[kSlice], do_slice[kSlice], dq_acc[kSlice];
  const std::int64_t q_offset = (token0 + safe_row) * dims.q_row_stride + static_cast<std::int64_t>(head) * D;
  const std::int64_t o_offset = (token0 + safe_row) * (static_cast<std::int64_t>(dims.heads) * D) +
                                static_cast<std::int64_t>(head) * D;
#pragma unroll
  for (int i = 0; i < kSlice; ++i) {
    q_slice[i] = to_float(q[q_offset + t + kRowThreads * i]);
    do_slice[i] = to_float(dout[o_offset + t + kRowThreads * i]);
    dq_acc[i] = 0.f;
  }
  const std::int64_t last_row = static_cast<std::int64_t>(q_block) * kQueryRows + kQueryRows - 1;
  const std::int64_t key_end = dims.causal ? (last_row + 1 < dims.seq ? last_row + 1 : dims.seq) : dims.seq;
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeyTile) {
    load_tile<kKeyTile, D>(k_tile, k + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
    load_tile<kKeyTile, D>(v_tile, v + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
    __syncthreads();
    for (int j = 0; j < kKeyTile; ++j) {
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int i = 0; i < kSlice; ++i) {
        s += q_slice[i] * to_float(k_tile[j][t + kRowThreads * i]);
        dp += do_slice[i] * to_float(v_tile[j][t + kRowThreads * i]);
      }
      s = group_sum<kRowThreads>(s);
      dp = group_sum<kRowThreads>(dp);
      const std::int64_t key = key0 + j;
      const bool masked = !valid_row || key >= dims.seq || (dims.causal && key > row);
      const float ds = masked ? 0.f : exp2f(s * scale_log2 - row_lse) * (dp - row_delta);
#pragma unroll
      for (int i = 0; i < kSlice; ++i) dq_acc[i] += ds * to_float(k_tile[j][t + kRowThreads * i]);
    }
    __syncthreads();
  }
  if (!valid_row) return;
#pragma unroll
  for (int i = 0; i < kSlice; ++i) dq[q_offset + t + kRowThreads * i] = to_bf16(dq_acc[i] * scale);
}

template <int D>
void launch_backward(const bf16* q, const bf16* k, const bf16* v, const bf16* dout, const float* lse,
                     const float* delta, bf16* dq, bf16* dk, bf16* dv, const AttentionDims& dims,
                     cudaStream_t stream) {
  const dim3 kv_grid(static_cast<unsigned>((dims.seq + kKeyRows - 1) / kKeyRows), dims.kv_heads,
                     static_cast<unsigned>(dims.batch));
  dkdv_kernel<D><<<kv_grid, kKvThreads, 0, stream>>>(q, k, v, dout, lse, delta, dk, dv, dims);
  TWIN_CUDA_CHECK_LAUNCH();
  const dim3 q_grid(static_cast<unsigned>((dims.seq + kQueryRows - 1) / kQueryRows), dims.heads,
                    static_cast<unsigned>(dims.batch));
  dq_kernel<D><<<q_grid, kDqThreads, 0, stream>>>(q, k, v, dout, lse, delta, dq, dims);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void attention_backward(const bf16* q, const bf16* k, const bf16* v, const bf16* o, const bf16* dout, const float* lse,
                        float* delta, bf16* dq, bf16* dk, bf16* dv, const AttentionDims& shape, cudaStream_t stream) {
  AttentionDims dims = shape;
  detail::check_attention_dims(dims, q, k, v);
  detail::require(reinterpret_cast<std::uintptr_t>(dout) % 16 == 0, "attention backward: dout must be 16-byte aligned");
  const std::int64_t rows = dims.batch * dims.seq * dims.heads;
  delta_kernel<<<static_cast<unsigned>((rows * 32 + 255) / 256), 256, 0, stream>>>(o, dout, delta, dims);
  TWIN_CUDA_CHECK_LAUNCH();
  if (dims.head_dim == 64)
    launch_backward<64>(q, k, v, dout, lse, delta, dq, dk, dv, dims, stream);
  else
    launch_backward<128>(q, k, v, dout, lse, delta, dq, dk, dv, dims, stream);
}

}  // namespace twin::kernels
