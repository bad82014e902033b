// Causal (or full, or sliding-window) self-attention as the executor runs it and the calibration times it, through
// one of the implementations core/attention_implementation.hpp names:
//   cudnn               cuDNN's fused flash attention: the operation graphs of its SDPA pattern (gpu/attention.cpp),
//                       one forward and one backward plan per shape, built once. The backward accumulates dQ in
//                       fp32 with atomics, so its bits are not guaranteed run to run. The default.
//   cudnn_deterministic the same forward; a backward whose dQ cuDNN reduces in a fixed order (its dP-workspace
//                       engine): bit-reproducible, at about twice the backward time on Hopper
//                       (docs/PERFORMANCE.md).
//   kernels             twin's own flash-style kernels (gpu/kernels), deterministic.
// Layouts are those of kernels::attention_forward: q [b*s, heads, head_dim] rows q_row_stride apart; k, v
// [b*s, kv_heads, head_dim] rows kv_row_stride apart; o [b*s, heads, head_dim] contiguous; lse [b, heads, s]
// fp32, the natural-log sum of exp of each row's scaled scores (all three write the same statistic).
// The cuDNN backends also run MLA's shape, values narrower than queries and keys (AttentionDims::v_head_dim: o, dO
// [b*s, heads, v_head_dim]; cuDNN 9 documents d_qk 192 with d_v 128 on Hopper, forward and backward).
// The cuDNN backends also run a block of context parallelism's ring: seq queries against seq_kv keys, each
// sequence's rows a stride apart (kernels::AttentionDims), causal only where seq == seq_kv.
// Every backend runs a sliding window (AttentionDims::window, causal self-attention): cuDNN through the frontend's
// left-bound band mask (gpu/attention.cpp), the kernels by skipping the key tiles left of the band. A window of at
// least seq keys is the causal mask, and runs as it (the same plan).
// Every backend soft-caps the scaled scores where AttentionDims::softcap > 0 (Gemma-2): cuDNN through the frontend's
// Softcap score modifier (DIV, TANH_FWD, MUL before the mask; MUL, TANH_BWD, DIV on the scores' gradient), the
// kernels by a tanh per score in both passes.
// The cuDNN backends also drop attention probabilities (AttentionDropout): the frontend's SDPA dropout, a Philox
// Bernoulli RNG node over the [b, h, s, s_kv] probabilities keyed by a seed, the kept ones scaled by 1 / (1 - p);
// the backward draws the same mask from the same seed. cuDNN takes no dropout with a sliding window, and the
// kernels backend none at all: both throw std::invalid_argument.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <cudnn.h>

#include "core/attention_implementation.hpp"
#include "gpu/kernels.hpp"

namespace twin::gpu {

// Dropout of the attention probabilities: each dropped with `probability`, the mask Philox's under `seed` (offset 0),
// so a forward, its recompute and its backward given the same seed use one mask. 0: none.
struct AttentionDropout {
  float probability = 0;
  std::int64_t seed = 0;
};

class Attention {
 public:
  explicit Attention(AttentionImplementation backend);
  ~Attention();
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;

  AttentionImplementation backend() const { return backend_; }
  // Enqueues on `stream`. The first call of a shape builds its cuDNN plan (host work, tens of ms).
  void forward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v, kernels::bf16* o, float* lse,
               const kernels::AttentionDims& dims, cudaStream_t stream, const AttentionDropout& dropout = {});
  // dq has q's layout (row stride q_row_stride), dk and dv k's. Scratch (rowsum(dO * O), cuDNN's fp32 dQ
  // and workspace) is allocated and freed stream-ordered on `stream`.
  void backward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v, const kernels::bf16* o,
                const kernels::bf16* dout, const float* lse, kernels::bf16* dq, kernels::bf16* dk, kernels::bf16* dv,
                const kernels::AttentionDims& dims, cudaStream_t stream, const AttentionDropout& dropout = {});
  // The bytes backward() allocates as its scratch for `dims` (building the shape's plans if needed): the kernels'
  // row sums; cuDNN's workspace, the row sums, the RNG state and, but for the deterministic engine, the fp32 dQ.
  std::int64_t backward_scratch_bytes(const kernels::AttentionDims& dims, float dropout = 0);

 private:
  struct Plans;
  using ShapeKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, int, int, std::int64_t, std::int64_t,
                              std::int64_t, std::int64_t, bool, std::int64_t, std::int64_t, std::int64_t, float,
                              float>;
  Plans& plans_for(const kernels::AttentionDims& dims, float dropout);

  AttentionImplementation backend_;
  cudnnHandle_t handle_ = nullptr;
  std::map<ShapeKey, std::unique_ptr<Plans>> plans_;
};

}  // namespace twin::gpu
