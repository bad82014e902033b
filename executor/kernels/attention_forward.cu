// Flash-style causal attention forward (FlashAttention-2's loop order): a block owns 64 query rows of
// one head, 4 threads per row each holding a quarter of q and of the output accumulator; K/V tiles of
// 32 keys pass through shared memory and the softmax is computed online, so no score matrix is stored.
// Plain fp32 FMA arithmetic (no tensor cores): correct first, slow.
#include "executor/kernels/attention_tile.cuh"

namespace twin::kernels {
namespace {

using namespace detail;

constexpr int kRows = 64;        // query rows per block
constexpr int kKeys = 32;        // keys per shared-memory tile
constexpr int kThreadsPerRow = 4;
constexpr int kThreads = kRows * kThreadsPerRow;

template <int D>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(const bf16* q, const bf16* k, const bf16* v,
                                                                     bf16* o, float* lse, AttentionDims dims) {
  constexpr int kSlice = D / kThreadsPerRow;  // elements of a row per thread: d = t + 4 i
  __shared__ __align__(16) bf16 k_tile[kKeys][D];
  __shared__ __align__(16) bf16 v_tile[kKeys][D];
  const int block_rows = static_cast<int>((dims.seq + kRows - 1) / kRows);
  const int q_block = dims.causal ? block_rows - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / (dims.heads / dims.kv_heads);
  const int t = threadIdx.x % kThreadsPerRow;
  const std::int64_t row = static_cast<std::int64_t>(q_block) * kRows + threadIdx.x / kThreadsPerRow;
  const std::int64_t token0 = static_cast<std::int64_t>(batch) * dims.seq;
  const bool valid_row = row < dims.seq;
  const float scale_log2 = kLog2e * rsqrtf(static_cast<float>(D));

  float q_slice[kSlice], acc[kSlice];
  const bf16* q_row = q + (token0 + (valid_row ? row : 0)) * dims.q_row_stride + static_cast<std::int64_t>(head) * D;
#pragma unroll
  for (int i = 0; i < kSlice; ++i) {
    q_slice[i] = valid_row ? to_float(q_row[t + kThreadsPerRow * i]) * scale_log2 : 0.f;
    acc[i] = 0.f;
  }
  float running_max = -INFINITY, running_sum = 0.f;
  const std::int64_t last_row = static_cast<std::int64_t>(q_block) * kRows + kRows - 1;
  const std::int64_t key_end = dims.causal ? (last_row + 1 < dims.seq ? last_row + 1 : dims.seq) : dims.seq;
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeys) {
    load_tile<kKeys, D>(k_tile, k + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
    load_tile<kKeys, D>(v_tile, v + token0 * dims.kv_row_stride, key0, dims.seq, dims.kv_row_stride, kv_head);
    __syncthreads();
    float score[kKeys];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeys; ++j) {
      float partial = 0.f;
#pragma unroll
      for (int i = 0; i < kSlice; ++i) partial += q_slice[i] * to_float(k_tile[j][t + kThreadsPerRow * i]);
      partial = group_sum<kThreadsPerRow>(partial);
      const std::int64_t key = key0 + j;
      const bool masked = key >= dims.seq || (dims.causal && key > row);
      score[j] = masked ? -INFINITY : partial;
      tile_max = fmaxf(tile_max, score[j]);
    }
    const float new_max = fmaxf(running_max, tile_max);
    if (new_max != -INFINITY) {  // a row with every key so far masked has nothing to rescale
      const float correction = exp2f(running_max - new_max);
      running_sum *= correction;
#pragma unroll
      for (int i = 0; i < kSlice; ++i) acc[i] *= correction;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        const float p = exp2f(score[j] - new_max);
        running_sum += p;
#pragma unroll
        for (int i = 0; i < kSlice; ++i) acc[i] += p * to_float(v_tile[j][t + kThreadsPerRow * i]);
      }
      running_max = new_max;
    }
    __syncthreads();
  }
  if (!valid_row) return;
  const float inverse = 1.f / running_sum;
  bf16* o_row = o + (token0 + row) * (static_cast<std::int64_t>(dims.heads) * D) + static_cast<std::int64_t>(head) * D;
#pragma unroll
  for (int i = 0; i < kSlice; ++i) o_row[t + kThreadsPerRow * i] = to_bf16(acc[i] * inverse);
  if (t == 0)
    lse[(static_cast<std::int64_t>(batch) * dims.heads + head) * dims.seq + row] =
        running_max * kLn2 + logf(running_sum);
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
  if (dims.q_row_stride == 0) dims.q_row_stride = static_cast<std::int64_t>(dims.heads) * dims.head_dim;
  if (dims.kv_row_stride == 0) dims.kv_row_stride = static_cast<std::int64_t>(dims.kv_heads) * dims.head_dim;
  const auto aligned16 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  detail::require(dims.q_row_stride % 8 == 0 && dims.kv_row_stride % 8 == 0 && aligned16(q) && aligned16(k) &&
                      aligned16(v),
                  "attention: row strides must be multiples of 8 elements and q, k, v 16-byte aligned");
}

}  // namespace twin::kernels
