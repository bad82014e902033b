// QK-norm (Qwen3's q_norm and k_norm, Megatron's --qk-layernorm): an RMSNorm over each query and key head of the
// fused QKV rows, after the QKV projection and before RoPE. The lowering's one op per pass (rows tokens x (heads +
// groups), head_dim columns, strategies/lowering_layer.cpp) runs as one launch of the norm's kernel entry
// (gpu/op_kernels.hpp) over the heads where they lie, in place: a token's query and key heads are heads + groups
// contiguous rows of head_dim, the query heads scaled by q_norm's weight and the key heads by k_norm's. Calibration
// times that entry and kernel (norm_narrow.cu) on contiguous rows of the same count and width
// (calibrate/gpu/kernel_benches.cpp): the same bytes in the same 16-byte pieces, only their addresses differ.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "gpu/op_kernels.hpp"

namespace twin::exec {

struct QkNormShape {
  std::int64_t tokens = 0, heads = 0, groups = 0, head_dim = 0;
  std::int64_t qkv_width = 0;  // elements from one token's QKV row to the next's
  // The saved pre-norm queries and keys: [tokens, (heads + groups) head_dim], each token's query heads, then its keys.
  std::int64_t saved_width() const { return (heads + groups) * head_dim; }
  std::int64_t rows() const { return tokens * (heads + groups); }
};

// The query and key heads of `qkv` ([tokens, qkv_width], queries from column 0, keys after them) normalised in
// place; `weights` [2, head_dim] is q_norm then k_norm; rstd [rows()] holds each token's heads' 1/rms, its query
// heads then its key heads.
gpu::NormForward qk_norm_forward_call(gpu::bf16* qkv, const gpu::bf16* weights, float* rstd, const QkNormShape& shape);
// The gradient through the norms, in place on the query and key heads of `d_qkv` (the QKV projection's output
// gradient, after RoPE's backward), from the saved pre-norm heads; the weights' gradients into `weight_grads`
// [2, head_dim], stored or (`accumulate`) added. `partials`: qk_norm_partial_floats(shape).
gpu::NormBackward qk_norm_backward_call(gpu::bf16* d_qkv, const gpu::bf16* saved, const gpu::bf16* weights,
                                        const float* rstd, float* partials, kernels::GradRef weight_grads, bool accumulate,
                                        const QkNormShape& shape);
std::size_t qk_norm_partial_floats(const QkNormShape& shape);
// Copies each token's query and key heads out of `qkv` into `saved` [tokens, saved_width()] (what the backward
// reads: the forward overwrites them).
void save_query_and_key(const gpu::bf16* qkv, gpu::bf16* saved, const QkNormShape& shape, cudaStream_t stream);

}  // namespace twin::exec
