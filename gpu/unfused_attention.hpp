// Megatron-LM's unfused core attention as the kernels it launches (`attention_backend` unfused; cost/
// unfused_attention.hpp lists and prices the same kernels), causal self-attention over whole sequences:
//   forward   S = Q K^T / sqrt(d)     batched GEMM (the scale in its alpha, as Megatron's baddbmm)
//             P = softmax(S)         kernels::causal_softmax_forward, in place
//             P' = dropout(P)        kernels::dropout_add_forward without a residual (if any): P' and its mask
//             O = P' V               batched GEMM
//   backward  dP' = dO V^T           batched GEMM into scratch
//             dP = dropout'(dP')     kernels::dropout_backward, in place (if any)
//             dV = P'^T dO           batched GEMM
//             dS = softmax'(P, dP)   kernels::causal_softmax_backward, in place
//             dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d)
// Layouts are gpu/attention.hpp's (q [b*s, heads, d] rows q_row_stride apart, k and v kv_row_stride apart, o
// contiguous); the forward keeps what the backward reads in UnfusedScores, as Megatron's autograd keeps it (the
// memory model's "softmax output", "attention dropout mask" and "attention dropout output", core/layer.cpp). Each
// product is one cuBLASLt call per sequence and query head of a key-value group, batched over the key-value heads
// (Megatron copies K and V to every head and makes one call). Not run: sliding windows, soft caps, sinks, values
// of another width, ring blocks, a sequence no multiple of 8 (std::invalid_argument).
#pragma once
#include <cstdint>

#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "gpu/strided_matmul.hpp"

namespace twin::gpu {

// [batch, heads, seq, seq] each: the probabilities, and with dropout the dropped ones and their 1-byte mask.
struct UnfusedScores {
  kernels::bf16* probs = nullptr;
  kernels::bf16* dropped = nullptr;
  std::uint8_t* mask = nullptr;
};
// The bytes of one buffer that holds a call's UnfusedScores (2, or with dropout 5, per score), and its parts.
std::int64_t unfused_scores_bytes(const kernels::AttentionDims& dims, bool dropout);
UnfusedScores unfused_scores_in(void* buffer, const kernels::AttentionDims& dims, bool dropout);

class UnfusedAttention {
 public:
  // Enqueue on `stream`. The dropout's mask is kernels::dropout_add_forward's draw of `dropout.seed` over the
  // [batch * heads * seq, seq] probabilities.
  void forward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v, kernels::bf16* o,
               const UnfusedScores& scores, const kernels::AttentionDims& dims, const AttentionDropout& dropout,
               cudaStream_t stream);
  // dq has q's layout, dk and dv k's. Scratch of one score matrix per head, stream-ordered on `stream`.
  void backward(const kernels::bf16* q, const kernels::bf16* k, const kernels::bf16* v, const kernels::bf16* d_o,
                const UnfusedScores& scores, kernels::bf16* dq, kernels::bf16* dk, kernels::bf16* dv,
                const kernels::AttentionDims& dims, const AttentionDropout& dropout, cudaStream_t stream);

 private:
  exec::StridedMatmul matmul_;
};

}  // namespace twin::gpu
