// Flash-style attention backward on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate), without
// atomics so the result is the same bits every run, in three kernels:
//   delta[row] = rowsum(dO * O);
//   dK, dV by blocks of 64 keys (16 per warp, K and V kept in shared memory), looping over the query
//   heads of the key's GQA group and over double-buffered tiles of 32 queries, recomputing P^T from the
//   stored logsumexp: dV += P^T dO, dK += dS^T Q;
//   dQ by blocks of 64 query rows (16 per warp, Q and dO held as fragments), looping over double-buffered
//   tiles of 32 keys: dQ += dS K.
// Recomputing P in both passes costs one more QK^T than FlashAttention-2's atomic dQ.
#include "gpu/kernels/attention_mma.cuh"

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

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 16 * kWarps;  // keys per dK/dV block, query rows per dQ block
constexpr int kTile = 32;                // queries (dK/dV) or keys (dQ) per shared-memory tile
constexpr int kTileBlocks = kTile / 8;

// Shared memory of the dK/dV kernel, in padded rows: K, V, then two buffers of (Q, dO) tiles.
template <int D>
constexpr std::size_t dkdv_shared_bytes() {
  return static_cast<std::size_t>(2 * kBlockRows + 4 * kTile) * (D + kPad) * sizeof(bf16);
}
// Of the dQ kernel: two buffers of (K, V) tiles; Q and dO pass through them first.
template <int D>
constexpr std::size_t dq_shared_bytes() {
  return static_cast<std::size_t>(4 * kTile) * (D + kPad) * sizeof(bf16);
}

// In a C fragment of 16 rows x kTile columns: element (nb, e) of lane (g, t) lies in column 8 nb + 2t + e.
template <int D>
__global__ void __launch_bounds__(kThreads) dkdv_kernel(const bf16* q, const bf16* k, const bf16* v,
                                                        const bf16* dout, const float* lse, const float* delta,
                                                        bf16* dk, bf16* dv, AttentionDims dims) {
  using Row = bf16[D + kPad];
  extern __shared__ __align__(128) unsigned char shared_raw[];
  Row* k_tile = reinterpret_cast<Row*>(shared_raw);
  Row* v_tile = k_tile + kBlockRows;
  Row* q_tiles = v_tile + kBlockRows;  // buffer b: Q at q_tiles + 2 b kTile, dO kTile rows after
  constexpr int kDSteps = D / 16, kDBlocks = D / 8;
  const int kv_head = blockIdx.y, batch = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t token0 = static_cast<std::int64_t>(batch) * dims.seq;
  const std::int64_t key0 = static_cast<std::int64_t>(blockIdx.x) * kBlockRows;
  const std::int64_t warp_key0 = key0 + 16 * warp;
  const std::int64_t keys[2] = {warp_key0 + g, warp_key0 + g + 8};
  const float scale = rsqrtf(static_cast<float>(D));
  const ScoreMap score_map{scale, dims.softcap};
  const int group = dims.heads / dims.kv_heads;
  const std::int64_t out_stride = static_cast<std::int64_t>(dims.heads) * D;  // dout is contiguous
  const std::int64_t query_start = dims.causal ? key0 : 0;                   // key0 is a multiple of kTile
  // A window: the block's last key is seen by queries up to window - 1 after it.
  const std::int64_t window_end = key0 + kBlockRows - 1 + dims.window;
  const std::int64_t query_end = dims.window > 0 && window_end < dims.seq ? window_end : dims.seq;
  const std::int64_t tiles_per_head = (query_end - query_start + kTile - 1) / kTile;
  const std::int64_t iterations = tiles_per_head * group;

  async_load_rows<kBlockRows, D>(k_tile, k + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
  async_load_rows<kBlockRows, D>(v_tile, v + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
  const auto load_queries = [&](std::int64_t it) {
    Row* buffer = q_tiles + 2 * kTile * (it % 2);
    const int head = kv_head * group + static_cast<int>(it / tiles_per_head);
    const std::int64_t query0 = query_start + (it % tiles_per_head) * kTile;
    async_load_rows<kTile, D>(buffer, q + token0 * dims.q_row_stride, query0, dims.seq, dims.q_row_stride, head);
    async_load_rows<kTile, D>(buffer + kTile, dout + token0 * out_stride, query0, dims.seq, out_stride, head);
  };
  load_queries(0);
  async_commit();

  float dk_acc[kDBlocks][4] = {}, dv_acc[kDBlocks][4] = {};
  for (std::int64_t it = 0; it < iterations; ++it) {
    if (it + 1 < iterations) load_queries(it + 1);  // into the buffer the last iteration finished with
    async_commit();
    async_wait<1>();
    __syncthreads();
    const Row* q_tile = q_tiles + 2 * kTile * (it % 2);
    const Row* do_tile = q_tile + kTile;
    const int head = kv_head * group + static_cast<int>(it / tiles_per_head);
    const std::int64_t query0 = query_start + (it % tiles_per_head) * kTile;

    float score[kTileBlocks][4] = {}, dp[kTileBlocks][4] = {};  // S^T and dP^T: 16 keys x kTile queries
#pragma unroll
    for (int s = 0; s < kDSteps; ++s) {
      Fragment k_frag, v_frag;
      load_a<D>(k_frag, k_tile, 16 * warp, 16 * s);
      load_a<D>(v_frag, v_tile, 16 * warp, 16 * s);
#pragma unroll
      for (int nb = 0; nb < kTileBlocks; nb += 2) {
        Fragment b;
        load_b_nk<D>(b, q_tile, 8 * nb, 16 * s);
        mma_bf16(score[nb], k_frag, b[0], b[1]);
        mma_bf16(score[nb + 1], k_frag, b[2], b[3]);
        load_b_nk<D>(b, do_tile, 8 * nb, 16 * s);
        mma_bf16(dp[nb], v_frag, b[0], b[1]);
        mma_bf16(dp[nb + 1], v_frag, b[2], b[3]);
      }
    }
    const std::int64_t stats = (static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq;
#pragma unroll
    for (int nb = 0; nb < kTileBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const std::int64_t query = query0 + 8 * nb + 2 * t + e;
        const bool valid_query = query < dims.seq;
        const float query_lse = valid_query ? lse[stats + query] * kLog2e : 0.f;
        const float query_delta = valid_query ? delta[stats + query] : 0.f;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const bool masked = !valid_query || keys[half] >= dims.seq || (dims.causal && keys[half] > query) ||
                              outside_window(keys[half], query, dims.window);
          float slope = 1.f;
          const float p = masked ? 0.f : exp2f(score_map.log2_score(score[nb][2 * half + e], &slope) - query_lse);
          score[nb][2 * half + e] = p;
          dp[nb][2 * half + e] = p * (dp[nb][2 * half + e] - query_delta) * slope;
        }
      }
#pragma unroll
    for (int ks = 0; ks < kTile / 16; ++ks) {
      Fragment p, ds;
      a_from_c(p, score[2 * ks], score[2 * ks + 1]);
      a_from_c(ds, dp[2 * ks], dp[2 * ks + 1]);
#pragma unroll
      for (int db = 0; db < kDBlocks; db += 2) {
        Fragment b;
        load_b_kn<D>(b, do_tile, 16 * ks, 8 * db);
        mma_bf16(dv_acc[db], p, b[0], b[1]);
        mma_bf16(dv_acc[db + 1], p, b[2], b[3]);
        load_b_kn<D>(b, q_tile, 16 * ks, 8 * db);
        mma_bf16(dk_acc[db], ds, b[0], b[1]);
        mma_bf16(dk_acc[db + 1], ds, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this buffer: the next iteration loads into it
  }
  async_wait<0>();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (keys[half] >= dims.seq) continue;
    const std::int64_t offset = (token0 + keys[half]) * dims.kv_row_stride + static_cast<std::int64_t>(kv_head) * D;
#pragma unroll
    for (int db = 0; db < kDBlocks; ++db) {
      *reinterpret_cast<__nv_bfloat162*>(dk + offset + 8 * db + 2 * t) =
          __floats2bfloat162_rn(dk_acc[db][2 * half] * scale, dk_acc[db][2 * half + 1] * scale);
      *reinterpret_cast<__nv_bfloat162*>(dv + offset + 8 * db + 2 * t) =
          __floats2bfloat162_rn(dv_acc[db][2 * half], dv_acc[db][2 * half + 1]);
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) dq_kernel(const bf16* q, const bf16* k, const bf16* v,
                                                      const bf16* dout, const float* lse, const float* delta,
                                                      bf16* dq, AttentionDims dims) {
  using Row = bf16[D + kPad];
  extern __shared__ __align__(128) unsigned char shared_raw[];
  Row* kv_tiles = reinterpret_cast<Row*>(shared_raw);  // buffer b: K at kv_tiles + 2 b kTile, V kTile rows after
  constexpr int kDSteps = D / 16, kDBlocks = D / 8;
  const int block_rows = static_cast<int>((dims.seq + kBlockRows - 1) / kBlockRows);
  const int q_block = dims.causal ? block_rows - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (dims.heads / dims.kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t token0 = static_cast<std::int64_t>(batch) * dims.seq;
  const std::int64_t q0 = static_cast<std::int64_t>(q_block) * kBlockRows;
  const std::int64_t warp_row0 = q0 + 16 * warp;
  const std::int64_t rows[2] = {warp_row0 + g, warp_row0 + g + 8};
  const float scale = rsqrtf(static_cast<float>(D));
  const ScoreMap score_map{scale, dims.softcap};
  const std::int64_t out_stride = static_cast<std::int64_t>(dims.heads) * D;
  const std::int64_t stats = (static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq;
  float row_lse[2], row_delta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const bool valid = rows[half] < dims.seq;
    row_lse[half] = valid ? lse[stats + rows[half]] * kLog2e : 0.f;
    row_delta[half] = valid ? delta[stats + rows[half]] : 0.f;
  }

  // Q and dO (kBlockRows rows each) pass through the tile buffers once, into registers.
  async_load_rows<kBlockRows, D>(kv_tiles, q + token0 * dims.q_row_stride, q0, dims.seq, dims.q_row_stride, head);
  async_load_rows<kBlockRows, D>(kv_tiles + kBlockRows, dout + token0 * out_stride, q0, dims.seq, out_stride, head);
  async_commit();
  async_wait<0>();
  __syncthreads();
  Fragment q_frag[kDSteps], do_frag[kDSteps];
#pragma unroll
  for (int s = 0; s < kDSteps; ++s) {
    load_a<D>(q_frag[s], kv_tiles, 16 * warp, 16 * s);
    load_a<D>(do_frag[s], kv_tiles + kBlockRows, 16 * warp, 16 * s);
  }
  __syncthreads();

  const std::int64_t key_end = dims.causal ? (q0 + kBlockRows < dims.seq ? q0 + kBlockRows : dims.seq) : dims.seq;
  const auto load_keys = [&](std::int64_t key0) {
    Row* buffer = kv_tiles + 2 * kTile * ((key0 / kTile) % 2);
    async_load_rows<kTile, D>(buffer, k + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
    async_load_rows<kTile, D>(buffer + kTile, v + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride,
                              kv_head);
  };
  const std::int64_t key_begin = first_key_tile(q0, dims.window, kTile);  // a window skips the tiles left of it
  load_keys(key_begin);
  async_commit();
  float dq_acc[kDBlocks][4] = {};
  for (std::int64_t key0 = key_begin; key0 < key_end; key0 += kTile) {
    if (key0 + kTile < key_end) load_keys(key0 + kTile);  // into the buffer the last iteration finished with
    async_commit();
    async_wait<1>();
    __syncthreads();
    const Row* k_tile = kv_tiles + 2 * kTile * ((key0 / kTile) % 2);
    const Row* v_tile = k_tile + kTile;

    float score[kTileBlocks][4] = {}, dp[kTileBlocks][4] = {};  // S and dP: 16 rows x kTile keys
#pragma unroll
    for (int s = 0; s < kDSteps; ++s)
#pragma unroll
      for (int nb = 0; nb < kTileBlocks; nb += 2) {
        Fragment b;
        load_b_nk<D>(b, k_tile, 8 * nb, 16 * s);
        mma_bf16(score[nb], q_frag[s], b[0], b[1]);
        mma_bf16(score[nb + 1], q_frag[s], b[2], b[3]);
        load_b_nk<D>(b, v_tile, 8 * nb, 16 * s);
        mma_bf16(dp[nb], do_frag[s], b[0], b[1]);
        mma_bf16(dp[nb + 1], do_frag[s], b[2], b[3]);
      }
#pragma unroll
    for (int nb = 0; nb < kTileBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const std::int64_t key = key0 + 8 * nb + 2 * t + e;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const bool masked = rows[half] >= dims.seq || key >= dims.seq || (dims.causal && key > rows[half]) ||
                              outside_window(key, rows[half], dims.window);
          float slope = 1.f;
          const float p = masked ? 0.f : exp2f(score_map.log2_score(score[nb][2 * half + e], &slope) - row_lse[half]);
          dp[nb][2 * half + e] = p * (dp[nb][2 * half + e] - row_delta[half]) * slope;
        }
      }
#pragma unroll
    for (int ks = 0; ks < kTile / 16; ++ks) {
      Fragment ds;
      a_from_c(ds, dp[2 * ks], dp[2 * ks + 1]);
#pragma unroll
      for (int db = 0; db < kDBlocks; db += 2) {
        Fragment b;
        load_b_kn<D>(b, k_tile, 16 * ks, 8 * db);
        mma_bf16(dq_acc[db], ds, b[0], b[1]);
        mma_bf16(dq_acc[db + 1], ds, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this buffer: the next iteration loads into it
  }
  async_wait<0>();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (rows[half] >= dims.seq) continue;
    bf16* dq_row = dq + (token0 + rows[half]) * dims.q_row_stride + static_cast<std::int64_t>(head) * D;
#pragma unroll
    for (int db = 0; db < kDBlocks; ++db)
      *reinterpret_cast<__nv_bfloat162*>(dq_row + 8 * db + 2 * t) =
          __floats2bfloat162_rn(dq_acc[db][2 * half] * scale, dq_acc[db][2 * half + 1] * scale);
  }
}

template <int D>
void launch_backward(const bf16* q, const bf16* k, const bf16* v, const bf16* dout, const float* lse,
                     const float* delta, bf16* dq, bf16* dk, bf16* dv, const AttentionDims& dims,
                     cudaStream_t stream) {
  // Above 48 KiB of dynamic shared memory a kernel must opt in; cheap enough to repeat per launch.
  TWIN_CUDA_CHECK(cudaFuncSetAttribute(dkdv_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(dkdv_shared_bytes<D>())));
  TWIN_CUDA_CHECK(cudaFuncSetAttribute(dq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(dq_shared_bytes<D>())));
  const unsigned blocks = static_cast<unsigned>((dims.seq + kBlockRows - 1) / kBlockRows);
  const dim3 kv_grid(blocks, dims.kv_heads, static_cast<unsigned>(dims.batch));
  dkdv_kernel<D><<<kv_grid, kThreads, dkdv_shared_bytes<D>(), stream>>>(q, k, v, dout, lse, delta, dk, dv, dims);
  TWIN_CUDA_CHECK_LAUNCH();
  const dim3 q_grid(blocks, dims.heads, static_cast<unsigned>(dims.batch));
  dq_kernel<D><<<q_grid, kThreads, dq_shared_bytes<D>(), stream>>>(q, k, v, dout, lse, delta, dq, dims);
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
