#include "gpu/ring_attention.hpp"

#include <stdexcept>

#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

using kernels::bf16;

// The attention of the block: which queries (from row q_first of each sequence, `queries` of them) against
// which keys (`keys` from row 0 of each sequence of the key block).
struct BlockRows {
  std::int64_t q_first = 0, queries = 0, keys = 0;
  bool causal = false;
};

BlockRows rows_of(RingBlock block, const RingShape& s) {
  switch (block) {
    case RingBlock::diagonal: return {0, s.seq, s.seq, true};
    case RingBlock::first_half_keys: return {0, s.seq, s.seq / 2, false};
    case RingBlock::second_half_queries: return {s.seq / 2, s.seq / 2, s.seq, false};
  }
  throw std::logic_error("ring attention: unknown block");
}

kernels::AttentionDims dims_of(const RingShape& s, const BlockRows& r, std::int64_t q_row_stride,
                               std::int64_t kv_row_stride) {
  kernels::AttentionDims d;
  d.batch = s.batch;
  d.seq = r.queries;
  d.seq_kv = r.keys;
  d.heads = s.heads;
  d.kv_heads = s.kv_heads;
  d.head_dim = s.head_dim;
  d.q_row_stride = q_row_stride;
  d.kv_row_stride = kv_row_stride;
  d.causal = r.causal;
  d.q_sequence_rows = s.seq;
  d.kv_sequence_rows = s.seq;
  return d;
}

void require_even(const RingShape& s) {
  if (s.seq % 2 != 0) throw std::invalid_argument("ring attention: a rank's rows must be two equal chunks");
}

}  // namespace

RingBlock ring_block(int cp_rank, int step, int cp) {
  if (cp < 1 || cp_rank < 0 || cp_rank >= cp || step < 0 || step >= cp)
    throw std::invalid_argument("ring attention: step or rank outside the ring");
  if (step == 0) return RingBlock::diagonal;
  return step <= cp_rank ? RingBlock::first_half_keys : RingBlock::second_half_queries;
}

void ring_forward_block(Attention& attention, RingBlock block, const RingShape& s, const bf16* q, const bf16* k,
                        const bf16* v, std::int64_t kv_row_stride, float* lse, bf16* scratch_o, float* scratch_lse,
                        cudaStream_t stream) {
  require_even(s);
  const BlockRows r = rows_of(block, s);
  const kernels::AttentionDims dims = dims_of(s, r, s.q_row_stride, kv_row_stride);
  float* block_lse = block == RingBlock::diagonal ? lse : scratch_lse;
  attention.forward(q + r.q_first * s.q_row_stride, k, v, scratch_o + r.q_first * s.q_width(),
                    block_lse + r.q_first, dims, stream);
}

void ring_merge_block(RingBlock block, const RingShape& s, const bf16* scratch_o, const float* scratch_lse,
                      float* o_acc, float* lse, cudaStream_t stream) {
  require_even(s);
  if (block == RingBlock::diagonal) return kernels::bf16_to_f32(scratch_o, o_acc, s.tokens() * s.q_width(), stream);
  const BlockRows r = rows_of(block, s);
  const kernels::AttentionMergeShape merge{s.batch, s.seq, r.q_first, r.queries, s.heads, s.head_dim};
  kernels::attention_merge(o_acc, lse, scratch_o, scratch_lse, merge, stream);
}

void ring_backward_block(Attention& attention, RingBlock block, const RingShape& s, const bf16* q, const bf16* kv,
                         const bf16* o, const bf16* dout, const float* lse, float* dq_acc, bf16* scratch_dq,
                         bf16* dkv, cudaStream_t stream) {
  require_even(s);
  const BlockRows r = rows_of(block, s);
  const std::int64_t kv_row_stride = 2 * s.kv_width();
  const std::int64_t q_offset = r.q_first * s.q_row_stride, o_offset = r.q_first * s.q_width();
  const kernels::AttentionDims dims = dims_of(s, r, s.q_row_stride, kv_row_stride);
  // The rows a block does not reach get no gradient from it: zero, so that adding them is adding nothing.
  TWIN_CUDA_CHECK(cudaMemsetAsync(dkv, 0, static_cast<std::size_t>(ring_kv_bytes(s)), stream));
  if (block == RingBlock::second_half_queries)
    TWIN_CUDA_CHECK(cudaMemsetAsync(scratch_dq, 0, static_cast<std::size_t>(s.tokens() * s.q_row_stride * 2), stream));
  attention.backward(q + q_offset, kv, kv + s.kv_width(), o + o_offset, dout + o_offset, lse + r.q_first,
                     scratch_dq + q_offset, dkv, dkv + s.kv_width(), dims, stream);
  kernels::add_bf16_rows_to_f32(dq_acc, scratch_dq, s.tokens(), s.q_width(), s.q_row_stride, stream);
}

void pack_ring_kv(const RingShape& s, const bf16* qkv, std::int64_t qkv_row_stride, bf16* kv, cudaStream_t stream) {
  const std::size_t row_bytes = static_cast<std::size_t>(2 * s.kv_width()) * sizeof(bf16);
  TWIN_CUDA_CHECK(cudaMemcpy2DAsync(kv, row_bytes, qkv + s.q_width(), static_cast<std::size_t>(qkv_row_stride) * sizeof(bf16),
                                    row_bytes, static_cast<std::size_t>(s.tokens()), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace twin::gpu
