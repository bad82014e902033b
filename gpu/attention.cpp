#include "gpu/attention.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/checks.hpp"
#include "gpu/cudnn_graph.hpp"

// The graphs below are cuDNN's scaled-dot-product-attention pattern, which its runtime recognises and
// runs as one fused flash-attention kernel (forward) or one kernel set (backward). cuDNN documents the
// pattern through its frontend's SDPA nodes (cudnn-frontend, include/cudnn_frontend/node/
// scaled_dot_product_flash_attention.h, CompositeSDPANode and CompositeSDPABackwardNode): the backend
// matches the operations and their order, so they follow that description exactly. Scores stay virtual
// (never in memory); K and V enter transposed (KT, VT) as the backend expects.

namespace twin::gpu {

namespace {

using cudnn::Binding;
using Dims = std::vector<std::int64_t>;

// Tensor ids of the graphs: memory and host scalars first, intermediates from 100.
enum Uid : std::int64_t {
  kQ = 1, kKT, kV, kO, kStats, kScale, kNegativeInfinity, kDout, kDq, kDk, kDv, kSoftmaxSum, kDqAccumulator, kOne,
  kWindow,
  kScores = 100, kScaled, kRow, kColumn, kKeep, kMasked, kRowMax, kShifted, kExp, kRowSum, kLogSum, kProbabilities,
  kDoutTimesO, kRowDot, kProbabilitiesT, kDvAllHeads, kDp, kDpShifted, kDsUnscaled, kDs, kDsT, kDkAllHeads, kK,
  kWindowRow, kWindowColumn, kColumnPlusWindow, kInWindow, kWindowMasked
};

// s queries against skv keys per sequence; the sequences qs rows apart in Q, O, dO, dQ and Stats, kvs rows apart
// in K, V, dK and dV (a block of context parallelism's ring reads part of each sequence's rows). Queries and keys
// are d wide, values and outputs dv (MLA: d_qk != d_v), V's rows (and dV's) v_stride apart. A causal mask keeps,
// with a window, only the last `window` keys of each query (0: none cut, a window of at least skv keys included).
struct Shape {
  std::int64_t b, s, skv, h, hk, d, q_stride, kv_stride, qs, kvs;
  bool causal;
  std::int64_t dv, v_stride, window;
};

Shape shape_of(const kernels::AttentionDims& dims) {
  if (dims.window < 0 || (dims.window > 0 && !dims.causal))
    throw std::invalid_argument("attention: a window needs the causal mask and at least one key");
  const std::int64_t d = dims.head_dim, skv = dims.seq_kv ? dims.seq_kv : dims.seq;
  return {dims.batch, dims.seq, skv, dims.heads, dims.kv_heads, d,
          dims.q_row_stride ? dims.q_row_stride : dims.heads * d,
          dims.kv_row_stride ? dims.kv_row_stride : dims.kv_heads * d,
          dims.q_sequence_rows ? dims.q_sequence_rows : dims.seq, dims.kv_sequence_rows ? dims.kv_sequence_rows : skv,
          dims.causal, dims.v_head_dim ? dims.v_head_dim : d,
          dims.v_row_stride ? dims.v_row_stride
                            : (dims.kv_row_stride ? dims.kv_row_stride
                                                  : dims.kv_heads * (dims.v_head_dim ? dims.v_head_dim : d)),
          dims.causal && dims.window > 0 && dims.window < skv ? dims.window : 0};
}

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
  const std::int64_t masked = causal_mask(g, x, kScaled);
  intermediate(g, kRowMax, row_dims(x), row_strides(x));
  intermediate(g, kShifted, scores_dims(x), scores_strides(x));
  intermediate(g, kExp, scores_dims(x), scores_strides(x));
  intermediate(g, kRowSum, row_dims(x), row_strides(x));
  intermediate(g, kLogSum, row_dims(x), row_strides(x));
  intermediate(g, kProbabilities, scores_dims(x), scores_strides(x), CUDNN_DATA_BFLOAT16);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, kRowMax);
  g.pointwise(CUDNN_POINTWISE_SUB, kShifted, masked, kRowMax);
  g.pointwise(CUDNN_POINTWISE_EXP, kExp, kShifted);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, kExp, kRowSum);
  g.pointwise(CUDNN_POINTWISE_LOG, kLogSum, kRowSum);
  g.pointwise(CUDNN_POINTWISE_ADD, kStats, kRowMax, kLogSum);
  g.pointwise(CUDNN_POINTWISE_DIV, kProbabilities, kExp, kRowSum);
  g.matmul(kProbabilities, kV, kO);
  return g.finalize(handle);
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

// dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO * O)) * scale, dK = dS^T Q, dQ = dS K, with P recomputed
// from Stats. With GQA the per-query-head dK and dV are summed over each group. Deterministic: dQ straight
// from its matmul (cuDNN's dP-workspace engine); otherwise through an fp32 accumulator.
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

  // rowsum(dO * O), kept in memory: the backend reads it in a second pass.
  intermediate(g, kDoutTimesO, {x.b, x.h, x.s, x.dv}, {x.h * x.s * x.dv, x.s * x.dv, x.h * x.dv, 1});
  intermediate(g, kRowDot, row_dims(x), row_strides(x));
  g.pointwise(CUDNN_POINTWISE_MUL, kDoutTimesO, kDout, kO);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, kDoutTimesO, kRowDot);
  g.pointwise(CUDNN_POINTWISE_MUL, kSoftmaxSum, kRowDot, kOne);

  // P = exp(scale * Q K^T - Stats), masked.
  intermediate(g, kScores, scores_dims(x), scores_strides(x));
  intermediate(g, kScaled, scores_dims(x), scores_strides(x));
  intermediate(g, kShifted, scores_dims(x), scores_strides(x));
  g.matmul(kQ, kKT, kScores);
  g.pointwise(CUDNN_POINTWISE_MUL, kScaled, kScores, kScale);
  g.pointwise(CUDNN_POINTWISE_SUB, kShifted, kScaled, kStats);
  const std::int64_t masked = causal_mask(g, x, kShifted);
  intermediate(g, kExp, scores_dims(x), scores_strides(x));
  g.pointwise(CUDNN_POINTWISE_EXP, kExp, masked);

  key_value_gradient(g, x, kExp, kProbabilitiesT, kDout, kDvAllHeads, kDv, x.dv);  // dV = P^T dO

  // dS = P (dO V^T - rowsum(dO * O)) * scale.
  for (std::int64_t uid : {kDp, kDpShifted, kDsUnscaled, kDs}) intermediate(g, uid, scores_dims(x), scores_strides(x));
  g.matmul(kDout, kV, kDp);
  g.pointwise(CUDNN_POINTWISE_SUB, kDpShifted, kDp, kSoftmaxSum);
  g.pointwise(CUDNN_POINTWISE_MUL, kDsUnscaled, kDpShifted, kExp);
  g.pointwise(CUDNN_POINTWISE_MUL, kDs, kDsUnscaled, kScale);

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
         (x.causal ? " causal" : "") + (x.window ? " window=" + std::to_string(x.window) : std::string()) + ")";
}

// The host scalars of the causal mask and its window, bound at execution where the graph has them.
struct MaskScalars {
  float negative_infinity = -std::numeric_limits<float>::infinity(), window = 0;
  void bind(const Shape& x, std::vector<std::pair<std::int64_t, void*>>& pointers) {
    if (!x.causal) return;
    pointers.push_back({kNegativeInfinity, &negative_infinity});
    window = static_cast<float>(x.window);  // exact: a window below 2^24 keys
    if (x.window) pointers.push_back({kWindow, &window});
  }
};

// Whole self-attention of each sequence: what twin's own kernels run.
bool whole_sequences(const kernels::AttentionDims& dims) {
  const Shape x = shape_of(dims);
  return x.skv == x.s && x.qs == x.s && x.kvs == x.s;
}

void require_kernels_shape(const kernels::AttentionDims& dims) {
  if (!whole_sequences(dims))
    throw std::invalid_argument("attention: the kernels backend runs whole self-attention only (a ring block of "
                                "context parallelism needs a cuDNN backend)");
  const Shape x = shape_of(dims);
  if (x.dv != x.d || x.v_stride != x.kv_stride)
    throw std::invalid_argument("attention: the kernels backend runs values as wide as the keys, in the keys' rows "
                                "(MLA's v_head_dim needs a cuDNN backend)");
}

}  // namespace

struct Attention::Plans {
  cudnn::Plan forward, backward;
  std::int64_t dq_accumulator_bytes;
};

Attention::Attention(AttentionImplementation backend) : backend_(backend) {
  if (backend_ != AttentionImplementation::kernels) TWIN_CUDNN_CHECK(cudnnCreate(&handle_));
}

Attention::~Attention() {
  if (handle_) cudnnDestroy(handle_);
}

Attention::Plans& Attention::plans_for(const kernels::AttentionDims& dims) {
  const Shape x = shape_of(dims);
  const ShapeKey key{x.b, x.s, x.skv, int(x.h), int(x.hk), int(x.d), x.q_stride, x.kv_stride, x.qs, x.kvs, x.causal,
                     x.dv, x.v_stride, x.window};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  if (x.h % x.hk != 0) throw std::invalid_argument("attention: heads must be a multiple of kv_heads");
  const bool deterministic = backend_ == AttentionImplementation::cudnn_deterministic;
  cudnn::Descriptor forward = forward_graph(handle_, x), backward = backward_graph(handle_, x, deterministic);
  auto plans = std::make_unique<Plans>(Plans{cudnn::Plan(handle_, forward, describe(x, "forward")),
                                             cudnn::Plan(handle_, backward, describe(x, "backward")),
                                             deterministic ? 0 : x.b * x.h * x.s * x.d * std::int64_t(sizeof(float))});
  return *plans_.emplace(key, std::move(plans)).first->second;
}

void Attention::forward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v, kernels::bf16* o,
                        float* lse, const kernels::AttentionDims& dims, cudaStream_t stream) {
  if (backend_ == AttentionImplementation::kernels) {
    require_kernels_shape(dims);
    return kernels::attention_forward(q, k, v, o, lse, dims, stream);
  }
  const Plans& p = plans_for(dims);
  TWIN_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  float scale = 1.0f / std::sqrt(float(dims.head_dim));
  MaskScalars mask;
  std::vector<std::pair<std::int64_t, void*>> pointers{
      {kQ, const_cast<kernels::bf16*>(q)}, {kKT, const_cast<kernels::bf16*>(k)}, {kV, const_cast<kernels::bf16*>(v)},
      {kO, o}, {kStats, lse}, {kScale, &scale}};
  mask.bind(shape_of(dims), pointers);
  void* workspace = nullptr;
  if (p.forward.workspace_bytes() > 0)
    TWIN_CUDA_CHECK(cudaMallocAsync(&workspace, p.forward.workspace_bytes(), stream));
  p.forward.execute(handle_, pointers, workspace);
  if (workspace) TWIN_CUDA_CHECK(cudaFreeAsync(workspace, stream));
}

void Attention::backward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v,
                         const kernels::bf16* o, const kernels::bf16* dout, const float* lse, kernels::bf16* dq,
                         kernels::bf16* dk, kernels::bf16* dv, const kernels::AttentionDims& dims,
                         cudaStream_t stream) {
  const std::int64_t row_bytes = dims.batch * dims.heads * dims.seq * std::int64_t(sizeof(float));
  if (backend_ == AttentionImplementation::kernels) {
    require_kernels_shape(dims);
    float* delta = nullptr;
    TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&delta), row_bytes, stream));
    kernels::attention_backward(q, k, v, o, dout, lse, delta, dq, dk, dv, dims, stream);
    TWIN_CUDA_CHECK(cudaFreeAsync(delta, stream));
    return;
  }
  const Plans& p = plans_for(dims);
  TWIN_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  // One allocation: cuDNN's workspace, then rowsum(dO * O), then the fp32 dQ (256-byte aligned each).
  const auto aligned = [](std::int64_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::int64_t workspace_bytes = aligned(p.backward.workspace_bytes());
  char* scratch = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                                  workspace_bytes + aligned(row_bytes) + p.dq_accumulator_bytes, stream));
  void* softmax_sum = scratch + workspace_bytes;
  void* dq_accumulator = scratch + workspace_bytes + aligned(row_bytes);
  // Before cuDNN 9.6 the fp32 dQ had to arrive zeroed (cudnn-frontend, CompositeSDPABackwardNode).
  if (p.dq_accumulator_bytes > 0 && cudnnGetVersion() < 90600)
    TWIN_CUDA_CHECK(cudaMemsetAsync(dq_accumulator, 0, p.dq_accumulator_bytes, stream));
  float scale = 1.0f / std::sqrt(float(dims.head_dim)), one = 1.0f;
  MaskScalars mask;
  std::vector<std::pair<std::int64_t, void*>> pointers{
      {kQ, const_cast<kernels::bf16*>(q)},       {kKT, const_cast<kernels::bf16*>(k)},
      {kV, const_cast<kernels::bf16*>(v)},       {kO, const_cast<kernels::bf16*>(o)},
      {kDout, const_cast<kernels::bf16*>(dout)}, {kStats, const_cast<float*>(lse)},
      {kDq, dq}, {kDk, dk}, {kDv, dv}, {kSoftmaxSum, softmax_sum}, {kScale, &scale}, {kOne, &one}};
  mask.bind(shape_of(dims), pointers);
  if (p.dq_accumulator_bytes > 0) pointers.push_back({kDqAccumulator, dq_accumulator});
  p.backward.execute(handle_, pointers, p.backward.workspace_bytes() > 0 ? scratch : nullptr);
  TWIN_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace twin::gpu
