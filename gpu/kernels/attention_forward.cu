// Flash-style attention forward on tensor cores (FlashAttention-2's loop order): a block of 4 warps owns
// 64 query rows of one head, each warp 16 rows held as mma.sync m16n8k16 bf16 fragments. K/V tiles of 64
// keys are copied into shared memory with cp.async (the next K tile loads while P V runs) and the
// softmax is computed online in fp32 registers, so no score matrix is stored.
#include "gpu/kernels/attention_mma.cuh"

namespace twin::kernels {
namespace {

using namespace detail;

constexpr int kWarps = 4;
constexpr int kRows = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;           // keys per shared-memory tile (= kRows: the causal diagonal is one tile)
constexpr int kThreads = 32 * kWarps;

// Each query row's scores are spread over the 4 lanes (t) of a quad: row statistics reduce over them.
template <int D>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(const bf16* q, const bf16* k, const bf16* v,
                                                                     bf16* o, float* lse, AttentionDims dims) {
  constexpr int kDSteps = D / 16;  // k-steps of Q K^T
  constexpr int kDBlocks = D / 8;  // n-blocks of the output
  constexpr int kKeyBlocks = kKeys / 8;
  __shared__ __align__(128) bf16 k_tile[kKeys][D + kPad];
  __shared__ __align__(128) bf16 v_tile[kKeys][D + kPad];
  const int block_rows = static_cast<int>((dims.seq + kRows - 1) / kRows);
  // Causal: the longest blocks (last query rows) start first.
  const int q_block = dims.causal ? block_rows - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (dims.heads / dims.kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t token0 = static_cast<std::int64_t>(batch) * dims.seq;
  const std::int64_t q0 = static_cast<std::int64_t>(q_block) * kRows;
  const std::int64_t warp_row0 = q0 + 16 * warp;
  const ScoreMap score_map{rsqrtf(static_cast<float>(D)), dims.softcap};

  // Q passes through v_tile once, into registers as A fragments for all of D.
  async_load_rows<kKeys, D>(v_tile, q + token0 * dims.q_row_stride, q0, dims.seq, dims.q_row_stride, head);
  async_commit();
  async_wait<0>();
  __syncthreads();
  Fragment q_frag[kDSteps];
#pragma unroll
  for (int s = 0; s < kDSteps; ++s) load_a<D>(q_frag[s], v_tile, 16 * warp, 16 * s);
  __syncthreads();

  const std::int64_t key_end = dims.causal ? (q0 + kRows < dims.seq ? q0 + kRows : dims.seq) : dims.seq;
  // A window skips the whole tiles left of its band: the block's first row sees keys from q0 - window + 1 on.
  const std::int64_t key_begin = first_key_tile(q0, dims.window, kKeys);
  const bf16* k_src = k + token0 * dims.kv_row_stride;
  const bf16* v_src = v + token0 * dims.kv_row_stride;
  async_load_rows<kKeys, D>(k_tile, k_src, key_begin, dims.seq, dims.kv_row_stride, kv_head);
  async_commit();
  async_load_rows<kKeys, D>(v_tile, v_src, key_begin, dims.seq, dims.kv_row_stride, kv_head);
  async_commit();

  float acc[kDBlocks][4] = {};
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.f, 0.f};
  const std::int64_t rows[2] = {warp_row0 + g, warp_row0 + g + 8};
  for (std::int64_t key0 = key_begin; key0 < key_end; key0 += kKeys) {
    async_wait<1>();  // K tile in; V may still be in flight
    __syncthreads();
    float score[kKeyBlocks][4] = {};
#pragma unroll
    for (int s = 0; s < kDSteps; ++s)
#pragma unroll
      for (int nb = 0; nb < kKeyBlocks; nb += 2) {
        Fragment b;
        load_b_nk<D>(b, k_tile, 8 * nb, 16 * s);
        mma_bf16(score[nb], q_frag[s], b[0], b[1]);
        mma_bf16(score[nb + 1], q_frag[s], b[2], b[3]);
      }
    __syncthreads();  // every warp is done with k_tile: the next one may load behind P V
    if (key0 + kKeys < key_end)
      async_load_rows<kKeys, D>(k_tile, k_src, key0 + kKeys, dims.seq, dims.kv_row_stride, kv_head);
    async_commit();

    const bool needs_mask = key0 + kKeys > dims.seq || (dims.causal && key0 + kKeys - 1 > warp_row0) ||
                            (dims.window > 0 && key0 + dims.window <= warp_row0 + 15);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kKeyBlocks; ++nb)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& s = score[nb][2 * half + e];
          s = score_map.log2_score(s);
          if (needs_mask) {
            const std::int64_t key = key0 + 8 * nb + 2 * t + e;
            if (key >= dims.seq || (dims.causal && key > rows[half]) || outside_window(key, rows[half], dims.window))
              s = -INFINITY;
          }
          tile_max = fmaxf(tile_max, s);
        }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(running_max[half], tile_max);
      const float base = new_max == -INFINITY ? 0.f : new_max;  // a fully masked row stays at zero weight
      const float correction = exp2f(running_max[half] - base);
      running_max[half] = new_max;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < kKeyBlocks; ++nb)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& s = score[nb][2 * half + e];
          s = exp2f(s - base);
          sum += s;
        }
      running_sum[half] = running_sum[half] * correction + sum;  // quad-partial; reduced at the end
#pragma unroll
      for (int db = 0; db < kDBlocks; ++db) {
        acc[db][2 * half] *= correction;
        acc[db][2 * half + 1] *= correction;
      }
    }

    async_wait<1>();  // V tile in; the next K may still be in flight
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) {
      Fragment p;
      a_from_c(p, score[2 * ks], score[2 * ks + 1]);
#pragma unroll
      for (int db = 0; db < kDBlocks; db += 2) {
        Fragment b;
        load_b_kn<D>(b, v_tile, 16 * ks, 8 * db);
        mma_bf16(acc[db], p, b[0], b[1]);
        mma_bf16(acc[db + 1], p, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with v_tile
    if (key0 + kKeys < key_end)
      async_load_rows<kKeys, D>(v_tile, v_src, key0 + kKeys, dims.seq, dims.kv_row_stride, kv_head);
    async_commit();
  }
  async_wait<0>();

  const std::int64_t o_stride = static_cast<std::int64_t>(dims.heads) * D;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = running_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (rows[half] >= dims.seq) continue;
    const float inverse = 1.f / sum;
    bf16* o_row = o + (token0 + rows[half]) * o_stride + static_cast<std::int64_t>(head) * D;
#pragma unroll
    for (int db = 0; db < kDBlocks; ++db)
      *reinterpret_cast<__nv_bfloat162*>(o_row + 8 * db + 2 * t) =
          __floats2bfloat162_rn(acc[db][2 * half] * inverse, acc[db][2 * half + 1] * inverse);
    if (t == 0)
      lse[(static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq + rows[half]] =
          running_max[half] * kLn2 + logf(sum);
  }
}

}  // namespace

void attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* o, float* lse, const AttentionDims& shape,
                       cudaStream_t stream) {
  AttentionDims dims = shape;
  check_attention_dims(dims, q, k, v);
  const dim3 grid(static_cast<unsigned>((dims.seq + kRows - 1) / kRows), dims.heads, static_cast<unsigned>(dims.batch));
  if (dims.head_dim == 64)
    attention_forward_kernel<64><<<grid, kThreads, 0, stream>>>(q, k, v, o, lse, dims);
  else
    attention_forward_kernel<128><<<grid, kThreads, 0, stream>>>(q, k, v, o, lse, dims);
  TWIN_CUDA_CHECK_LAUNCH();
}

void detail::check_attention_dims(AttentionDims& dims, const void* q, const void* k, const void* v) {
  detail::require(dims.batch > 0 && dims.seq > 0 && dims.heads > 0 && dims.kv_heads > 0, "attention: empty shape");
  detail::require(dims.heads % dims.kv_heads == 0, "attention: kv_heads must divide heads");
  detail::require(dims.head_dim == 64 || dims.head_dim == 128, "attention: head_dim must be 64 or 128");
  detail::require(dims.batch <= 65535 && dims.heads <= 65535, "attention: batch and heads must be below 65536");
  detail::require(dims.window >= 0 && (dims.window == 0 || dims.causal), "attention: a window needs the causal mask");
  detail::require(dims.softcap >= 0, "attention: a soft-cap must be positive (0: none)");
  if (dims.q_row_stride == 0) dims.q_row_stride = static_cast<std::int64_t>(dims.heads) * dims.head_dim;
  if (dims.kv_row_stride == 0) dims.kv_row_stride = static_cast<std::int64_t>(dims.kv_heads) * dims.head_dim;
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  detail::require(dims.q_row_stride % 8 == 0 && dims.kv_row_stride % 8 == 0 && aligned16(q) && aligned16(k) &&
                      aligned16(v),
                  "attention: row strides must be multiples of 8 elements and q, k, v 16-byte aligned");
}

}  // namespace twin::kernels
