// cuDNN's operation graphs of scaled-dot-product attention (gpu/attention.cpp builds its plans from them and binds
// their tensors by these ids). Internal to gpu/attention*.cpp.
//
// The graphs are cuDNN's scaled-dot-product-attention pattern, which its runtime recognises and
// runs as one fused flash-attention kernel (forward) or one kernel set (backward). cuDNN documents the
// pattern through its frontend's SDPA nodes (cudnn-frontend, include/cudnn_frontend/node/
// scaled_dot_product_flash_attention.h, CompositeSDPANode and CompositeSDPABackwardNode): the backend
// matches the operations and their order, so they follow that description exactly. Scores stay virtual
// (never in memory); K and V enter transposed (KT, VT) as the backend expects.
#pragma once
#include <cstdint>
#include <string>

#include <cudnn.h>

#include "gpu/cudnn_graph.hpp"
#include "gpu/kernels.hpp"

namespace twin::gpu::attention_graphs {

// Tensor ids of the graphs: memory and host scalars first, intermediates from 90.
enum Uid : std::int64_t {
  kQ = 1, kKT, kV, kO, kStats, kScale, kNegativeInfinity, kDout, kDq, kDk, kDv, kSoftmaxSum, kDqAccumulator, kOne,
  kWindow, kSeed, kOffset, kDropoutScale, kSoftcap,
  kDropoutMask = 90, kDropped, kDroppedScaled, kDpMasked, kDsDropoutScaled,
  kScores = 100, kScaled, kRow, kColumn, kKeep, kMasked, kRowMax, kShifted, kExp, kRowSum, kLogSum, kProbabilities,
  kDoutTimesO, kRowDot, kProbabilitiesT, kDvAllHeads, kDp, kDpShifted, kDsUnscaled, kDs, kDsT, kDkAllHeads, kK,
  kWindowRow, kWindowColumn, kColumnPlusWindow, kInWindow, kWindowMasked, kBeforeTanh, kTanh, kCapped, kDsCapScaled,
  kDsThroughTanh, kDsUncapped
};

// s queries against skv keys per sequence; the sequences qs rows apart in Q, O, dO, dQ and Stats, kvs rows apart
// in K, V, dK and dV (a block of context parallelism's ring reads part of each sequence's rows). Queries and keys
// are d wide, values and outputs dv (MLA: d_qk != d_v), V's rows (and dV's) v_stride apart. A causal mask keeps,
// with a window, only the last `window` keys of each query (0: none cut, a window of at least skv keys included).
// A fraction `dropout` of the probabilities is dropped (0: none). With softcap > 0 the scaled scores are soft-capped,
// softcap x tanh(score / softcap), before the mask (cudnn-frontend's Softcap score modifier: DIV, TANH_FWD, MUL; its
// backward MUL, TANH_BWD, DIV on the scores' gradient before the scale).
struct Shape {
  std::int64_t b, s, skv, h, hk, d, q_stride, kv_stride, qs, kvs;
  bool causal;
  std::int64_t dv, v_stride, window;
  float dropout;
  float softcap = 0;
};

// The shape of `dims` with a fraction `dropout` of the probabilities dropped; throws std::invalid_argument for a
// window without the causal mask or a probability outside [0, 1).
Shape shape_of(const kernels::AttentionDims& dims, float dropout = 0);

// O = softmax(cap(scale * Q K^T), causal) V; Stats = rowmax + log(rowsum(exp(scores - rowmax))); with dropout the
// probabilities masked and scaled before V.
cudnn::Descriptor forward_graph(cudnnHandle_t handle, const Shape& x);
// dV, dK and dQ from O, dO and Stats (the formulas at its definition); `deterministic`: dQ without atomics.
cudnn::Descriptor backward_graph(cudnnHandle_t handle, const Shape& x, bool deterministic);
// "attention forward (b=... s=... ...)", naming a plan in errors.
std::string describe(const Shape& x, const char* pass);

}  // namespace twin::gpu::attention_graphs
