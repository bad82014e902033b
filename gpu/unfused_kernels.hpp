// Megatron-LM's unfused kernels that twin execute runs for the 2021-22 configurations: the cross-entropy's passes over
// an fp32 copy of the logits (framework.cross_entropy_loss_fusion false) and unfused attention's causal softmax
// (attention_backend unfused). Launchers as gpu/kernels.hpp's: bf16 storage, fp32 arithmetic, every launch checked,
// nothing synchronizes. Compiled by nvcc (C++17) and included by C++20 code.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace twin::kernels {

using bf16 = __nv_bfloat16;

// ---- softmax cross-entropy without fusion (gpu/kernels/cross_entropy_unfused.cu): Megatron-LM's passes over an
// fp32 copy of the logits [rows, vocab_shard], one kernel each (core/unfused_loss.hpp lists them and their bytes).
// Over the whole vocabulary (one shard): max, then subtract and gather, exp, sum, then divide and the loss. ----
// row_max[r] = the row's largest logit.
void rows_max_f32(const float* x, float* row_max, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// In place: x[r, :] -= row_max[r]; target_logit[r] = the shifted logit of targets[r] if this shard (its first
// vocabulary row vocab_start) holds it, else 0.
void subtract_rows_gather_target_f32(float* x, const float* row_max, const std::int32_t* targets, float* target_logit,
                                     std::int64_t rows, std::int64_t cols, std::int64_t vocab_start,
                                     cudaStream_t stream);
// In place: x = exp(x) over `count` elements.
void exp_f32(float* x, std::int64_t count, cudaStream_t stream);
// sum[r] = the sum of the row.
void rows_sum_f32(const float* x, float* sum, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// In place: x[r, :] /= sum[r] (the softmax, kept for the backward); loss[r] = log(sum[r]) - target_logit[r].
void softmax_divide_loss_f32(float* x, const float* sum, const float* target_logit, float* loss, std::int64_t rows,
                             std::int64_t cols, cudaStream_t stream);
// In place: x = (x - onehot(targets)) * scale (the softmax becomes the logits' gradient; a target in another shard
// subtracts nothing here).
void softmax_minus_onehot_f32(float* x, const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                              std::int64_t vocab_start, float scale, cudaStream_t stream);
// out = bf16(in) over `count` elements.
void f32_to_bf16(const float* in, bf16* out, std::int64_t count, cudaStream_t stream);

// ---- unfused attention's softmax (gpu/kernels/causal_softmax.cu; gpu/unfused_attention.hpp runs the rest) ----
// `matrices` square [seq, seq] score matrices back to back (seq a multiple of 8, 16-byte aligned); row i of each
// keeps keys 0..i. In place: each row becomes the softmax of its kept scores in fp32, stored bf16, the keys after i
// written 0 (Megatron-LM's scaled_upper_triang_masked_softmax, its scale already applied to the scores).
void causal_softmax_forward(bf16* scores, std::int64_t matrices, std::int64_t seq, cudaStream_t stream);
// In place over `grad` (dP on entry): dS = P (dP - sum_j P_j dP_j) per row, 0 after the row's query.
void causal_softmax_backward(const bf16* probs, bf16* grad, std::int64_t matrices, std::int64_t seq,
                             cudaStream_t stream);

}  // namespace twin::kernels
