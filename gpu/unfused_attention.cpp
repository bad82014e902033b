// Each product runs per sequence b and query head j of a key-value group, batched over the key-value heads: query
// head g * group + j meets key-value head g, and those queries lie group * head_dim apart in a row, their score
// matrices group apart, where the key-value heads lie head_dim apart.
#include "gpu/unfused_attention.hpp"

#include <cmath>
#include <functional>
#include <stdexcept>

#include "gpu/checks.hpp"
#include "gpu/unfused_kernels.hpp"

namespace twin::gpu {
namespace {

using kernels::bf16;
using exec::StridedOperand;
using exec::StridedProblem;

// The strided views of one call's operands, read off the dims.
struct Views {
  std::int64_t seq = 0, scores = 0;  // scores: one matrix's elements, seq x seq
  int heads = 0, kv_heads = 0, d = 0, group = 0;
  std::int64_t q_stride = 0, kv_stride = 0, o_stride = 0;

  // Query heads j, j + group, ... of sequence b: their first element's offset, and the operand.
  std::int64_t q_offset(std::int64_t b, int j) const { return b * seq * q_stride + j * d; }
  StridedOperand q() const { return {q_stride, static_cast<std::int64_t>(group) * d}; }
  std::int64_t o_offset(std::int64_t b, int j) const { return b * seq * o_stride + j * d; }
  StridedOperand o() const { return {o_stride, static_cast<std::int64_t>(group) * d}; }
  std::int64_t kv_offset(std::int64_t b) const { return b * seq * kv_stride; }
  StridedOperand kv() const { return {kv_stride, d}; }
  std::int64_t score_offset(std::int64_t b, int j) const { return (b * heads + j) * scores; }
  StridedOperand score() const { return {seq, group * scores}; }
};

Views views_of(const kernels::AttentionDims& dims) {
  const auto refuse = [](const char* what) { throw std::invalid_argument(std::string("unfused attention: ") + what); };
  if (!dims.causal) refuse("expected causal attention");
  if (dims.window != 0 || dims.softcap != 0) refuse("no sliding window or soft cap runs unfused");
  if ((dims.seq_kv != 0 && dims.seq_kv != dims.seq) || dims.q_sequence_rows != 0 || dims.kv_sequence_rows != 0)
    refuse("expected whole sequences (no ring block)");
  if ((dims.v_head_dim != 0 && dims.v_head_dim != dims.head_dim) ||
      (dims.v_row_stride != 0 && dims.v_row_stride != dims.kv_row_stride))
    refuse("expected values as wide as the keys, in the keys' rows");
  if (dims.batch <= 0 || dims.seq <= 0 || dims.seq % 8 != 0) refuse("expected a sequence that is a multiple of 8");
  if (dims.heads <= 0 || dims.kv_heads <= 0 || dims.heads % dims.kv_heads != 0 || dims.head_dim <= 0)
    refuse("expected heads a multiple of the key-value heads");
  Views v;
  v.seq = dims.seq;
  v.scores = dims.seq * dims.seq;
  v.heads = dims.heads;
  v.kv_heads = dims.kv_heads;
  v.d = dims.head_dim;
  v.group = dims.heads / dims.kv_heads;
  v.q_stride = dims.q_row_stride ? dims.q_row_stride : static_cast<std::int64_t>(dims.heads) * dims.head_dim;
  v.kv_stride = dims.kv_row_stride ? dims.kv_row_stride : static_cast<std::int64_t>(dims.kv_heads) * dims.head_dim;
  v.o_stride = static_cast<std::int64_t>(dims.heads) * dims.head_dim;
  return v;
}

void for_each_slice(const kernels::AttentionDims& dims, int group, const std::function<void(std::int64_t, int)>& fn) {
  for (std::int64_t b = 0; b < dims.batch; ++b)
    for (int j = 0; j < group; ++j) fn(b, j);
}

std::int64_t score_count(const kernels::AttentionDims& dims) {
  return dims.batch * dims.heads * dims.seq * dims.seq;
}

}  // namespace

std::int64_t unfused_scores_bytes(const kernels::AttentionDims& dims, bool dropout) {
  return score_count(dims) * (dropout ? 5 : 2);
}

UnfusedScores unfused_scores_in(void* buffer, const kernels::AttentionDims& dims, bool dropout) {
  const std::int64_t n = score_count(dims);
  auto* probs = static_cast<bf16*>(buffer);
  if (!dropout) return {probs, nullptr, nullptr};
  return {probs, probs + n, reinterpret_cast<std::uint8_t*>(probs + 2 * n)};
}

void UnfusedAttention::forward(const bf16* q, const bf16* k, const bf16* v, bf16* o, const UnfusedScores& scores,
                               const kernels::AttentionDims& dims, const AttentionDropout& dropout,
                               cudaStream_t stream) {
  const Views w = views_of(dims);
  const bool drop = dropout.probability > 0;
  if (drop && (scores.dropped == nullptr || scores.mask == nullptr))
    throw std::invalid_argument("unfused attention: dropout without buffers for the dropped scores and their mask");
  const float scale = 1.0f / std::sqrt(static_cast<float>(w.d));
  const StridedProblem qk{w.seq, w.seq, w.d, false, true, false, w.q(), w.kv(), w.score(), w.kv_heads};
  for_each_slice(dims, w.group, [&](std::int64_t b, int j) {
    matmul_.run(qk, scale, q + w.q_offset(b, j), k + w.kv_offset(b), scores.probs + w.score_offset(b, j), stream);
  });
  kernels::causal_softmax_forward(scores.probs, dims.batch * dims.heads, w.seq, stream);
  const bf16* used = scores.probs;
  if (drop) {
    const kernels::DropoutRun rows{0, dims.batch * dims.heads * w.seq, 0};
    kernels::dropout_add_forward(nullptr, scores.probs, scores.dropped, scores.mask, w.seq, rows,
                                 {dropout.probability, static_cast<std::uint64_t>(dropout.seed), 0}, stream);
    used = scores.dropped;
  }
  const StridedProblem pv{w.seq, w.d, w.seq, false, false, false, w.score(), w.kv(), w.o(), w.kv_heads};
  for_each_slice(dims, w.group, [&](std::int64_t b, int j) {
    matmul_.run(pv, 1.0f, used + w.score_offset(b, j), v + w.kv_offset(b), o + w.o_offset(b, j), stream);
  });
}

void UnfusedAttention::backward(const bf16* q, const bf16* k, const bf16* v, const bf16* d_o,
                                const UnfusedScores& scores, bf16* dq, bf16* dk, bf16* dv,
                                const kernels::AttentionDims& dims, const AttentionDropout& dropout,
                                cudaStream_t stream) {
  const Views w = views_of(dims);
  const bool drop = dropout.probability > 0;
  if (drop && (scores.dropped == nullptr || scores.mask == nullptr))
    throw std::invalid_argument("unfused attention: dropout without the forward's dropped scores and mask");
  const float scale = 1.0f / std::sqrt(static_cast<float>(w.d));
  const std::int64_t n = score_count(dims);
  bf16* grad = nullptr;  // dP', then dP, then dS
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&grad), n * sizeof(bf16), stream));
  const StridedProblem dp{w.seq, w.seq, w.d, false, true, false, w.o(), w.kv(), w.score(), w.kv_heads};
  for_each_slice(dims, w.group, [&](std::int64_t b, int j) {
    matmul_.run(dp, 1.0f, d_o + w.o_offset(b, j), v + w.kv_offset(b), grad + w.score_offset(b, j), stream);
  });
  if (drop) kernels::dropout_backward(grad, scores.mask, grad, n, dropout.probability, stream);
  const bf16* used = drop ? scores.dropped : scores.probs;
  // dV and dK sum over the group's query heads: the first stores, the others add.
  const auto keys_problem = [&](int j, const StridedOperand& right) {
    return StridedProblem{w.seq, w.d, w.seq, true, false, j > 0, w.score(), right, w.kv(), w.kv_heads};
  };
  for_each_slice(dims, w.group, [&](std::int64_t b, int j) {
    matmul_.run(keys_problem(j, w.o()), 1.0f, used + w.score_offset(b, j), d_o + w.o_offset(b, j),
                dv + w.kv_offset(b), stream);
  });
  kernels::causal_softmax_backward(scores.probs, grad, dims.batch * dims.heads, w.seq, stream);
  const StridedProblem dq_problem{w.seq, w.d, w.seq, false, false, false, w.score(), w.kv(), w.q(), w.kv_heads};
  for_each_slice(dims, w.group, [&](std::int64_t b, int j) {
    matmul_.run(dq_problem, scale, grad + w.score_offset(b, j), k + w.kv_offset(b), dq + w.q_offset(b, j), stream);
    matmul_.run(keys_problem(j, w.q()), scale, grad + w.score_offset(b, j), q + w.q_offset(b, j),
                dk + w.kv_offset(b), stream);
  });
  TWIN_CUDA_CHECK(cudaFreeAsync(grad, stream));
}

}  // namespace twin::gpu
