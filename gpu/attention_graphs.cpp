#include "gpu/attention_graphs.hpp"

#include <stdexcept>
#include <vector>

namespace twin::gpu::attention_graphs {
namespace {

using cudnn::Binding;
using Dims = std::vector<std::int64_t>;

// [b, h, s, skv] fp32 scores of every head, and [b, h, s, 1] row statistics (Stats in memory: qs rows apart).
Dims scores_dims(const Shape& x) { return {x.b, x.h, x.s, x.skv}; }
Dims scores_strides(const Shape& x) { return {x.h * x.s * x.skv, x.s * x.skv, x.skv, 1}; }
Dims row_dims(const Shape& x) { return {x.b, x.h, x.s, 1}; }
Dims row_strides(const Shape& x) { return {x.h * x.s, x.s, 1, 1}; }
Dims stats_strides(const Shape& x) { return {x.h * x.qs, x.qs, 1, 1}; }
// The same scores read transposed, [b, h, skv, s], in bf16 (the operand of dV and dK).
Dims transposed_dims(const Shape& x) { return {x.b, x.h, x.skv, x.s}; }
Dims transposed_strides(const Shape& x) { return {x.h * x.s * x.skv, x.s * x.skv, 1, x.skv}; }

// Q [b, h, s, d], and O and dO [b, h, s, dv] over the [b*qs, h, dv] rows.
void declare_q_o(cudnn::GraphBuilder& g, const Shape& x, bool with_gradients) {
  const Dims q_strides{x.qs * x.q_stride, x.d, x.q_stride, 1};
  g.tensor(kQ, {x.b, x.h, x.s, x.d}, q_strides, CUDNN_DATA_BFLOAT16);
  const Dims o_strides{x.qs * x.h * x.dv, x.dv, x.h * x.dv, 1};
  g.tensor(kO, {x.b, x.h, x.s, x.dv}, o_strides, CUDNN_DATA_BFLOAT16);
  g.tensor(kStats, row_dims(x), stats_strides(x), CUDNN_DATA_FLOAT);
  g.scalar(kScale, CUDNN_DATA_FLOAT);
  if (with_gradients) {
    g.tensor(kDout, {x.b, x.h, x.s, x.dv}, o_strides, CUDNN_DATA_BFLOAT16);
    g.tensor(kDq, {x.b, x.h, x.s, x.d}, q_strides, CUDNN_DATA_BFLOAT16);
  }
}

// out = causal ? (row >= column ? in : -inf) : in, as the frontend's diagonal band mask with right bound 0; then,
// with a window, out = column + window > row ? out : -inf, the frontend's left bound (its sliding_window_mask with
// top-left alignment, lowered for cuDNN before 9.21 as CompositeDiagonalBandMaskNode does: fresh indices of the
// masked scores, the column plus the window as a float host scalar, CMP_GT): the backend recognises the pattern and
// skips the key tiles left of the band.
std::int64_t causal_mask(cudnn::GraphBuilder& g, const Shape& x, std::int64_t in) {
  if (!x.causal) return in;
  const Dims dims = scores_dims(x), strides = scores_strides(x);
  g.scalar(kNegativeInfinity, CUDNN_DATA_FLOAT);
  g.tensor(kRow, dims, strides, CUDNN_DATA_INT32, Binding::intermediate);
  g.tensor(kColumn, dims, strides, CUDNN_DATA_INT32, Binding::intermediate);
  g.tensor(kKeep, dims, strides, CUDNN_DATA_BOOLEAN, Binding::intermediate);
  g.tensor(kMasked, dims, strides, CUDNN_DATA_FLOAT, Binding::intermediate);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, kRow, in, -1, -1, CUDNN_DATA_FLOAT, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, kColumn, in, -1, -1, CUDNN_DATA_FLOAT, 3);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, kKeep, kRow, kColumn, -1, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, kMasked, in, kNegativeInfinity, kKeep);
  if (x.window == 0) return kMasked;
  g.scalar(kWindow, CUDNN_DATA_FLOAT);
  g.tensor(kWindowRow, dims, strides, CUDNN_DATA_INT32, Binding::intermediate);
  g.tensor(kWindowColumn, dims, strides, CUDNN_DATA_INT32, Binding::intermediate);
  g.tensor(kColumnPlusWindow, dims, strides, CUDNN_DATA_FLOAT, Binding::intermediate);
  g.tensor(kInWindow, dims, strides, CUDNN_DATA_BOOLEAN, Binding::intermediate);
  g.tensor(kWindowMasked, dims, strides, CUDNN_DATA_FLOAT, Binding::intermediate);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, kWindowRow, kMasked, -1, -1, CUDNN_DATA_FLOAT, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, kWindowColumn, kMasked, -1, -1, CUDNN_DATA_FLOAT, 3);
  g.pointwise(CUDNN_POINTWISE_ADD, kColumnPlusWindow, kWindowColumn, kWindow);
  g.pointwise(CUDNN_POINTWISE_CMP_GT, kInWindow, kColumnPlusWindow, kWindowRow, -1, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, kWindowMasked, kMasked, kNegativeInfinity, kInWindow);
  return kWindowMasked;
}

void intermediate(cudnn::GraphBuilder& g, std::int64_t uid, const Dims& dims, const Dims& strides,
                  cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  g.tensor(uid, dims, strides, type, Binding::intermediate);
}

// out = softcap x tanh(in / softcap), as cudnn-frontend's Softcap score modifier builds it (DIV, TANH_FWD, MUL by the
// cap as a host scalar), where the frontend applies a score modifier: after the scale, before the masks. `in` without a
// cap. kBeforeTanh stays for the backward's TANH_BWD.
std::int64_t soft_cap(cudnn::GraphBuilder& g, const Shape& x, std::int64_t in) {
  if (x.softcap == 0) return in;
  g.scalar(kSoftcap, CUDNN_DATA_FLOAT);
  for (std::int64_t uid : {kBeforeTanh, kTanh, kCapped}) intermediate(g, uid, scores_dims(x), scores_strides(x));
  g.pointwise(CUDNN_POINTWISE_DIV, kBeforeTanh, in, kSoftcap);
  g.pointwise(CUDNN_POINTWISE_TANH_FWD, kTanh, kBeforeTanh);
  g.pointwise(CUDNN_POINTWISE_MUL, kCapped, kTanh, kSoftcap);
  return kCapped;
}

// The gradient of the capped scores taken through the cap, as the frontend's Softcap::backward: MUL by the cap,
// TANH_BWD at kBeforeTanh, DIV by the cap (dS (1 - tanh^2)); `ds` without a cap.
std::int64_t soft_cap_gradient(cudnn::GraphBuilder& g, const Shape& x, std::int64_t ds) {
  if (x.softcap == 0) return ds;
  for (std::int64_t uid : {kDsCapScaled, kDsThroughTanh, kDsUncapped})
    intermediate(g, uid, scores_dims(x), scores_strides(x));
  g.pointwise(CUDNN_POINTWISE_MUL, kDsCapScaled, ds, kSoftcap);
  g.pointwise_backward(CUDNN_POINTWISE_TANH_BWD, kDsThroughTanh, kDsCapScaled, kBeforeTanh);
  g.pointwise(CUDNN_POINTWISE_DIV, kDsUncapped, kDsThroughTanh, kSoftcap);
  return kDsUncapped;
}

// The dropout's inputs (the Philox seed and offset in memory, the scale 1 / (1 - p) by value) and its mask, drawn
// by the RNG node: 1 where a probability is kept, with probability 1 - p.
void dropout_mask(cudnn::GraphBuilder& g, const Shape& x) {
  g.tensor(kSeed, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT64);
  g.tensor(kOffset, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_INT64);
  g.scalar(kDropoutScale, CUDNN_DATA_FLOAT);
  intermediate(g, kDropoutMask, scores_dims(x), scores_strides(x));
  g.bernoulli(1.0 - static_cast<double>(x.dropout), kSeed, kOffset, kDropoutMask);
}

// The gradient of K or V: `scores` [b, h, s_q, s_kv] transposed (as `transposed`, bf16) times `other`
// [b, h, s_q, width]; with GQA per query head (`all_heads`), then summed over each group into `out`.
void key_value_gradient(cudnn::GraphBuilder& g, const Shape& x, std::int64_t scores, std::int64_t transposed,
                        std::int64_t other, std::int64_t all_heads, std::int64_t out, std::int64_t width) {
  intermediate(g, transposed, transposed_dims(x), transposed_strides(x), CUDNN_DATA_BFLOAT16);
  g.reshape(scores, transposed);
  if (x.h == x.hk) return g.matmul(transposed, other, out);
  intermediate(g, all_heads, {x.b, x.h, x.skv, width}, {x.h * x.skv * width, x.skv * width, width, 1},
               CUDNN_DATA_BFLOAT16);
  g.matmul(transposed, other, all_heads);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, all_heads, out);
}

// P (kExp) as the forward multiplied it into V: itself, or with dropout masked and scaled by 1 / (1 - p).
std::int64_t used_probabilities(cudnn::GraphBuilder& g, const Shape& x) {
  if (x.dropout == 0) return kExp;
  intermediate(g, kDropped, scores_dims(x), scores_strides(x));
  intermediate(g, kDroppedScaled, scores_dims(x), scores_strides(x));
  g.pointwise(CUDNN_POINTWISE_MUL, kDropped, kExp, kDropoutMask);
  g.pointwise(CUDNN_POINTWISE_MUL, kDroppedScaled, kDropped, kDropoutScale);
  return kDroppedScaled;
}

// kDs = P (dO V^T - rowsum(dO * O)) [through the cap] * scale; with dropout P (dO V^T M - (1 - p) rowsum(dO * O)) / (1 - p) * scale
// (the (1 - p) of the row sums is kOne's value).
void score_gradient(cudnn::GraphBuilder& g, const Shape& x) {
  for (std::int64_t uid : {kDp, kDpShifted, kDsUnscaled, kDs}) intermediate(g, uid, scores_dims(x), scores_strides(x));
  g.matmul(kDout, kV, kDp);
  std::int64_t dp = kDp, ds = kDsUnscaled;
  if (x.dropout > 0) {
    intermediate(g, kDpMasked, scores_dims(x), scores_strides(x));
    g.pointwise(CUDNN_POINTWISE_MUL, kDpMasked, kDp, kDropoutMask);
    dp = kDpMasked;
  }
  g.pointwise(CUDNN_POINTWISE_SUB, kDpShifted, dp, kSoftmaxSum);
  g.pointwise(CUDNN_POINTWISE_MUL, kDsUnscaled, kDpShifted, kExp);
  if (x.dropout > 0) {
    intermediate(g, kDsDropoutScaled, scores_dims(x), scores_strides(x));
    g.pointwise(CUDNN_POINTWISE_MUL, kDsDropoutScaled, kDsUnscaled, kDropoutScale);
    ds = kDsDropoutScaled;
  }
  g.pointwise(CUDNN_POINTWISE_MUL, kDs, soft_cap_gradient(g, x, ds), kScale);
}

}  // namespace

Shape shape_of(const kernels::AttentionDims& dims, float dropout) {
  if (dims.window < 0 || (dims.window > 0 && !dims.causal))
    throw std::invalid_argument("attention: a window needs the causal mask and at least one key");
  if (!(dropout >= 0 && dropout < 1))
    throw std::invalid_argument("attention: a dropout probability in [0, 1), got " + std::to_string(dropout));
  if (!(dims.softcap >= 0)) throw std::invalid_argument("attention: a soft-cap must be positive (0: none)");
  const std::int64_t d = dims.head_dim, skv = dims.seq_kv ? dims.seq_kv : dims.seq;
  return {dims.batch, dims.seq, skv, dims.heads, dims.kv_heads, d,
          dims.q_row_stride ? dims.q_row_stride : dims.heads * d,
          dims.kv_row_stride ? dims.kv_row_stride : dims.kv_heads * d,
          dims.q_sequence_rows ? dims.q_sequence_rows : dims.seq, dims.kv_sequence_rows ? dims.kv_sequence_rows : skv,
          dims.causal, dims.v_head_dim ? dims.v_head_dim : d,
          dims.v_row_stride ? dims.v_row_stride
                            : (dims.kv_row_stride ? dims.kv_row_stride
                                                  : dims.kv_heads * (dims.v_head_dim ? dims.v_head_dim : d)),
          dims.causal && dims.window > 0 && dims.window < skv ? dims.window : 0, dropout, dims.softcap};
}


// O = softmax(scale * Q K^T, causal) V; Stats = rowmax + log(rowsum(exp(scores - rowmax))).
cudnn::Descriptor forward_graph(cudnnHandle_t handle, const Shape& x) {
  cudnn::GraphBuilder g;
  declare_q_o(g, x, false);
  g.tensor(kKT, {x.b, x.hk, x.d, x.skv}, {x.kvs * x.kv_stride, x.d, 1, x.kv_stride}, CUDNN_DATA_BFLOAT16);
  g.tensor(kV, {x.b, x.hk, x.skv, x.dv}, {x.kvs * x.v_stride, x.dv, x.v_stride, 1}, CUDNN_DATA_BFLOAT16);
  intermediate(g, kScores, scores_dims(x), scores_strides(x));
  intermediate(g, kScaled, scores_dims(x), scores_strides(x));
  g.matmul(kQ, kKT, kScores);
  g.pointwise(CUDNN_POINTWISE_MUL, kScaled, kScores, kScale);
  const std::int64_t masked = causal_mask(g, x, soft_cap(g, x, kScaled));
  intermediate(g, kRowMax, row_dims(x), row_strides(x));
  intermediate(g, kShifted, scores_dims(x), scores_strides(x));
  intermediate(g, kExp, scores_dims(x), scores_strides(x));
  intermediate(g, kRowSum, row_dims(x), row_strides(x));
  intermediate(g, kLogSum, row_dims(x), row_strides(x));
  // The operand of P V is bf16: the probabilities themselves, or (dropout) them masked and scaled.
  intermediate(g, kProbabilities, scores_dims(x), scores_strides(x), x.dropout > 0 ? CUDNN_DATA_FLOAT
                                                                                    : CUDNN_DATA_BFLOAT16);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, kRowMax);
  g.pointwise(CUDNN_POINTWISE_SUB, kShifted, masked, kRowMax);
  g.pointwise(CUDNN_POINTWISE_EXP, kExp, kShifted);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, kExp, kRowSum);
  g.pointwise(CUDNN_POINTWISE_LOG, kLogSum, kRowSum);
  g.pointwise(CUDNN_POINTWISE_ADD, kStats, kRowMax, kLogSum);
  g.pointwise(CUDNN_POINTWISE_DIV, kProbabilities, kExp, kRowSum);
  if (x.dropout == 0) {
    g.matmul(kProbabilities, kV, kO);
    return g.finalize(handle);
  }
  dropout_mask(g, x);
  intermediate(g, kDropped, scores_dims(x), scores_strides(x));
  intermediate(g, kDroppedScaled, scores_dims(x), scores_strides(x), CUDNN_DATA_BFLOAT16);
  g.pointwise(CUDNN_POINTWISE_MUL, kDropped, kProbabilities, kDropoutMask);
  g.pointwise(CUDNN_POINTWISE_MUL, kDroppedScaled, kDropped, kDropoutScale);
  g.matmul(kDroppedScaled, kV, kO);
  return g.finalize(handle);
}

// dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO * O)) * scale, dK = dS^T Q, dQ = dS K, with P recomputed
// from Stats. With GQA the per-query-head dK and dV are summed over each group. Deterministic: dQ straight
// from its matmul (cuDNN's dP-workspace engine); otherwise through an fp32 accumulator. With dropout (mask M, kept
// 1 - p): dV = (P M / (1 - p))^T dO and dS = P (dP M - (1 - p) rowsum(dO * O)) / (1 - p) * scale, the frontend's
// CompositeSDPABackwardNode; the (1 - p) factor of the row sums is the value bound to kOne.
cudnn::Descriptor backward_graph(cudnnHandle_t handle, const Shape& x, bool deterministic) {
  cudnn::GraphBuilder g;
  declare_q_o(g, x, true);
  const Dims kv_dims{x.b, x.hk, x.skv, x.d}, kv_strides{x.kvs * x.kv_stride, x.d, x.kv_stride, 1};
  const Dims kvt_dims{x.b, x.hk, x.d, x.skv}, kvt_strides{x.kvs * x.kv_stride, x.d, 1, x.kv_stride};
  g.tensor(kKT, kvt_dims, kvt_strides, CUDNN_DATA_BFLOAT16);
  g.tensor(kV, {x.b, x.hk, x.dv, x.skv}, {x.kvs * x.v_stride, x.dv, 1, x.v_stride}, CUDNN_DATA_BFLOAT16);  // VT
  g.tensor(kDk, kv_dims, kv_strides, CUDNN_DATA_BFLOAT16);
  g.tensor(kDv, {x.b, x.hk, x.skv, x.dv}, {x.kvs * x.v_stride, x.dv, x.v_stride, 1}, CUDNN_DATA_BFLOAT16);
  g.tensor(kSoftmaxSum, row_dims(x), row_strides(x), CUDNN_DATA_FLOAT);
  g.scalar(kOne, CUDNN_DATA_FLOAT);
  const Dims all_heads{x.b, x.h, x.s, x.d}, all_heads_strides{x.h * x.s * x.d, x.s * x.d, x.d, 1};
  if (x.dropout > 0) dropout_mask(g, x);

  // rowsum(dO * O), kept in memory: the backend reads it in a second pass.
  intermediate(g, kDoutTimesO, {x.b, x.h, x.s, x.dv}, {x.h * x.s * x.dv, x.s * x.dv, x.h * x.dv, 1});
  intermediate(g, kRowDot, row_dims(x), row_strides(x));
  g.pointwise(CUDNN_POINTWISE_MUL, kDoutTimesO, kDout, kO);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, kDoutTimesO, kRowDot);
  g.pointwise(CUDNN_POINTWISE_MUL, kSoftmaxSum, kRowDot, kOne);

  // P = exp(cap(scale * Q K^T) - Stats), masked.
  intermediate(g, kScores, scores_dims(x), scores_strides(x));
  intermediate(g, kScaled, scores_dims(x), scores_strides(x));
  intermediate(g, kShifted, scores_dims(x), scores_strides(x));
  g.matmul(kQ, kKT, kScores);
  g.pointwise(CUDNN_POINTWISE_MUL, kScaled, kScores, kScale);
  g.pointwise(CUDNN_POINTWISE_SUB, kShifted, soft_cap(g, x, kScaled), kStats);
  const std::int64_t masked = causal_mask(g, x, kShifted);
  intermediate(g, kExp, scores_dims(x), scores_strides(x));
  g.pointwise(CUDNN_POINTWISE_EXP, kExp, masked);

  key_value_gradient(g, x, used_probabilities(g, x), kProbabilitiesT, kDout, kDvAllHeads, kDv, x.dv);  // dV = P^T dO
  score_gradient(g, x);

  key_value_gradient(g, x, kDs, kDsT, kQ, kDkAllHeads, kDk, x.d);  // dK = dS^T Q

  // dQ = dS K.
  intermediate(g, kK, kv_dims, kv_strides, CUDNN_DATA_BFLOAT16);
  g.reshape(kKT, kK);
  if (deterministic) {
    g.matmul(kDs, kK, kDq);
  } else {
    g.tensor(kDqAccumulator, all_heads, all_heads_strides, CUDNN_DATA_FLOAT);
    g.matmul(kDs, kK, kDqAccumulator);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, kDq, kDqAccumulator);
  }
  return g.finalize(handle);
}

std::string describe(const Shape& x, const char* pass) {
  return std::string("attention ") + pass + " (b=" + std::to_string(x.b) + " s=" + std::to_string(x.s) +
         (x.skv != x.s ? " s_kv=" + std::to_string(x.skv) : std::string()) +
         " heads=" + std::to_string(x.h) + " kv_heads=" + std::to_string(x.hk) + " head_dim=" + std::to_string(x.d) +
         (x.dv != x.d ? " v_head_dim=" + std::to_string(x.dv) : std::string()) +
         (x.causal ? " causal" : "") + (x.window ? " window=" + std::to_string(x.window) : std::string()) +
         (x.dropout > 0 ? " dropout=" + std::to_string(x.dropout) : std::string()) +
         (x.softcap > 0 ? " softcap=" + std::to_string(x.softcap) : std::string()) + ")";
}

}  // namespace twin::gpu::attention_graphs
