#include "gpu/attention.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/attention_graphs.hpp"
#include "gpu/checks.hpp"
#include "gpu/cudnn_graph.hpp"
#include "gpu/rng_state.hpp"

namespace twin::gpu {
namespace {

using namespace attention_graphs;

// Device bytes a call with dropout sets aside for the RNG's seed and offset (two int64, 256-byte aligned).
constexpr std::int64_t kRngStateBytes = 256;

// The dropout's seed (offset 0), written on `stream` into `rng_state` (kRngStateBytes of the call's scratch), and its
// scale by value, bound at execution where the graph has them.
struct DropoutBindings {
  float scale = 1;
  void bind(const Shape& x, const AttentionDropout& dropout, void* rng_state, cudaStream_t stream,
            std::vector<std::pair<std::int64_t, void*>>& pointers) {
    if (x.dropout == 0) return;
    auto* seed_offset = static_cast<std::int64_t*>(rng_state);
    write_rng_state(seed_offset, dropout.seed, 0, stream);
    scale = 1.0f / (1.0f - x.dropout);
    pointers.push_back({kSeed, seed_offset});
    pointers.push_back({kOffset, seed_offset + 1});
    pointers.push_back({kDropoutScale, &scale});
  }
};

// The host scalars of the soft-cap, the causal mask and its window, bound at execution where the graph has them.
struct MaskScalars {
  float negative_infinity = -std::numeric_limits<float>::infinity(), window = 0, softcap = 0;
  void bind(const Shape& x, std::vector<std::pair<std::int64_t, void*>>& pointers) {
    softcap = x.softcap;
    if (x.softcap > 0) pointers.push_back({kSoftcap, &softcap});
    if (!x.causal) return;
    pointers.push_back({kNegativeInfinity, &negative_infinity});
    window = static_cast<float>(x.window);  // exact: a window below 2^24 keys
    if (x.window) pointers.push_back({kWindow, &window});
  }
};

std::int64_t aligned_256(std::int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Whole self-attention of each sequence: what twin's own kernels run.
bool whole_sequences(const kernels::AttentionDims& dims) {
  const Shape x = shape_of(dims);
  return x.skv == x.s && x.qs == x.s && x.kvs == x.s;
}

void require_kernels_shape(const kernels::AttentionDims& dims, const AttentionDropout& dropout) {
  if (dropout.probability > 0)
    throw std::invalid_argument("attention: the kernels backend drops no attention probabilities (attention dropout "
                                "needs a cuDNN backend: --attention cudnn or cudnn-deterministic)");
  if (!whole_sequences(dims))
    throw std::invalid_argument("attention: the kernels backend runs whole self-attention only (a ring block of "
                                "context parallelism needs a cuDNN backend)");
  const Shape x = shape_of(dims);
  if (x.dv != x.d || x.v_stride != x.kv_stride)
    throw std::invalid_argument("attention: the kernels backend runs values as wide as the keys, in the keys' rows "
                                "(MLA's v_head_dim needs a cuDNN backend)");
}

}  // namespace

// A shape's plans and the shape they were built for (its strides, mask and dropout bind the tensors at execution).
struct Attention::Plans {
  cudnn::Plan forward, backward;
  std::int64_t dq_accumulator_bytes;
  Shape shape;
};

Attention::Attention(AttentionImplementation backend) : backend_(backend) {
  if (backend_ != AttentionImplementation::kernels) TWIN_CUDNN_CHECK(cudnnCreate(&handle_));
}

Attention::~Attention() {
  if (handle_) cudnnDestroy(handle_);
}

Attention::Plans& Attention::plans_for(const kernels::AttentionDims& dims, float dropout) {
  const Shape x = shape_of(dims, dropout);
  const ShapeKey key{x.b, x.s, x.skv, int(x.h), int(x.hk), int(x.d), x.q_stride, x.kv_stride, x.qs, x.kvs, x.causal,
                     x.dv, x.v_stride, x.window, x.dropout, x.softcap};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  if (x.h % x.hk != 0) throw std::invalid_argument("attention: heads must be a multiple of kv_heads");
  if (x.dropout > 0 && x.window > 0)  // the frontend refuses it: its band mask and its RNG do not fuse
    throw std::invalid_argument("attention: cuDNN drops no probabilities under a sliding window");
  const bool deterministic = backend_ == AttentionImplementation::cudnn_deterministic;
  cudnn::Descriptor forward = forward_graph(handle_, x), backward = backward_graph(handle_, x, deterministic);
  auto plans = std::make_unique<Plans>(Plans{cudnn::Plan(handle_, forward, describe(x, "forward")),
                                             cudnn::Plan(handle_, backward, describe(x, "backward")),
                                             deterministic ? 0 : x.b * x.h * x.s * x.d * std::int64_t(sizeof(float)),
                                             x});
  return *plans_.emplace(key, std::move(plans)).first->second;
}

void Attention::forward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v, kernels::bf16* o,
                        float* lse, const kernels::AttentionDims& dims, cudaStream_t stream,
                        const AttentionDropout& dropout) {
  if (backend_ == AttentionImplementation::kernels) {
    require_kernels_shape(dims, dropout);
    return kernels::attention_forward(q, k, v, o, lse, dims, stream);
  }
  const Plans& p = plans_for(dims, dropout.probability);
  const Shape& x = p.shape;
  TWIN_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  float scale = 1.0f / std::sqrt(float(dims.head_dim));
  MaskScalars mask;
  DropoutBindings dropped;
  std::vector<std::pair<std::int64_t, void*>> pointers{
      {kQ, const_cast<kernels::bf16*>(q)}, {kKT, const_cast<kernels::bf16*>(k)}, {kV, const_cast<kernels::bf16*>(v)},
      {kO, o}, {kStats, lse}, {kScale, &scale}};
  mask.bind(x, pointers);
  // One allocation: cuDNN's workspace, then (dropout) the RNG's seed and offset.
  const std::int64_t workspace_bytes = aligned_256(p.forward.workspace_bytes());
  const std::int64_t rng_bytes = x.dropout > 0 ? kRngStateBytes : 0;
  char* scratch = nullptr;
  if (workspace_bytes + rng_bytes > 0)
    TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), workspace_bytes + rng_bytes, stream));
  dropped.bind(x, dropout, scratch + workspace_bytes, stream, pointers);
  p.forward.execute(handle_, pointers, p.forward.workspace_bytes() > 0 ? scratch : nullptr);
  if (scratch) TWIN_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

std::int64_t Attention::backward_scratch_bytes(const kernels::AttentionDims& dims, float dropout) {
  const std::int64_t row_bytes = dims.batch * dims.heads * dims.seq * std::int64_t(sizeof(float));
  if (backend_ == AttentionImplementation::kernels) return row_bytes;
  const Plans& p = plans_for(dims, dropout);
  const std::int64_t rng_bytes = p.shape.dropout > 0 ? kRngStateBytes : 0;
  return aligned_256(p.backward.workspace_bytes()) + aligned_256(row_bytes) + rng_bytes + p.dq_accumulator_bytes;
}

void Attention::backward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v,
                         const kernels::bf16* o, const kernels::bf16* dout, const float* lse, kernels::bf16* dq,
                         kernels::bf16* dk, kernels::bf16* dv, const kernels::AttentionDims& dims,
                         cudaStream_t stream, const AttentionDropout& dropout) {
  const std::int64_t row_bytes = dims.batch * dims.heads * dims.seq * std::int64_t(sizeof(float));
  if (backend_ == AttentionImplementation::kernels) {
    require_kernels_shape(dims, dropout);
    float* delta = nullptr;
    TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&delta), row_bytes, stream));
    kernels::attention_backward(q, k, v, o, dout, lse, delta, dq, dk, dv, dims, stream);
    TWIN_CUDA_CHECK(cudaFreeAsync(delta, stream));
    return;
  }
  const Plans& p = plans_for(dims, dropout.probability);
  const Shape& x = p.shape;
  TWIN_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  // One allocation: cuDNN's workspace, then rowsum(dO * O), then (dropout) the RNG's seed and offset, then the fp32
  // dQ (256-byte aligned each).
  const std::int64_t workspace_bytes = aligned_256(p.backward.workspace_bytes());
  const std::int64_t rng_bytes = x.dropout > 0 ? kRngStateBytes : 0;
  char* scratch = nullptr;
  TWIN_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), backward_scratch_bytes(dims, dropout.probability),
                                  stream));
  void* softmax_sum = scratch + workspace_bytes;
  void* rng_state = scratch + workspace_bytes + aligned_256(row_bytes);
  void* dq_accumulator = scratch + workspace_bytes + aligned_256(row_bytes) + rng_bytes;
  // Before cuDNN 9.6 the fp32 dQ had to arrive zeroed (cudnn-frontend, CompositeSDPABackwardNode).
  if (p.dq_accumulator_bytes > 0 && cudnnGetVersion() < 90600)
    TWIN_CUDA_CHECK(cudaMemsetAsync(dq_accumulator, 0, p.dq_accumulator_bytes, stream));
  // kOne scales the row sums: 1, or with dropout the kept fraction 1 - p.
  float scale = 1.0f / std::sqrt(float(dims.head_dim)), one = 1.0f - x.dropout;
  MaskScalars mask;
  DropoutBindings dropped;
  std::vector<std::pair<std::int64_t, void*>> pointers{
      {kQ, const_cast<kernels::bf16*>(q)},       {kKT, const_cast<kernels::bf16*>(k)},
      {kV, const_cast<kernels::bf16*>(v)},       {kO, const_cast<kernels::bf16*>(o)},
      {kDout, const_cast<kernels::bf16*>(dout)}, {kStats, const_cast<float*>(lse)},
      {kDq, dq}, {kDk, dk}, {kDv, dv}, {kSoftmaxSum, softmax_sum}, {kScale, &scale}, {kOne, &one}};
  mask.bind(x, pointers);
  dropped.bind(x, dropout, rng_state, stream, pointers);
  if (p.dq_accumulator_bytes > 0) pointers.push_back({kDqAccumulator, dq_accumulator});
  p.backward.execute(handle_, pointers, p.backward.workspace_bytes() > 0 ? scratch : nullptr);
  TWIN_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace twin::gpu
