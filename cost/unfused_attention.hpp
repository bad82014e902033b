// Unfused attention as the kernels it launches (`attention_backend` unfused: Megatron-LM's core attention without a
// fused kernel, megatron/model/transformer.py `CoreAttention` of 2021-22 and `megatron/core/transformer/
// dot_product_attention.py` since), each priced as its kind is. A pass is one read or one write of the
// batch x heads x seq_q x seq_kv scores in 16-bit; unfused kernels compute every score (the causal mask is applied,
// not skipped).
//
//   forward   Q K^T          batched GEMM over head_dim (torch.baddbmm), writes S              1 pass
//             softmax        Megatron's fused scale-mask-softmax: reads S, writes P            2 passes
//             dropout        reads P, writes the dropped P and its 1-byte mask                2.5 passes (if any)
//             P V            batched GEMM over the keys, value_head_dim wide, reads P          1 pass
//   backward  dO V^T         batched GEMM, writes dP                                           1 pass
//             dropout        reads dP and the mask, writes dP                                 2.5 passes (if any)
//             P^T dO         batched GEMM (dV), reads P                                        1 pass
//             softmax        reads P and dP, writes dS                                         3 passes
//             dS K, dS^T Q   batched GEMMs (dQ, dK), each reads dS                             1 pass each
//
// A batched GEMM takes its FLOPs at the GEMM curve plus its pass over the scores: of reduction 64-128, its main loop
// is short beside the tile's store, which it does not hide. Timed on one H200 (`tests/gpu/unfused_attention_kernels.py`,
// 2026-12-01, five shapes of batch x heads x 2,048-4,096 squared at head dim 64-128, cuBLAS through torch.bmm and
// baddbmm): the ten products ran 0.65-1.08 times this sum (mean 0.87) and 1.07-1.89 times the longer of the two (mean
// 1.35), the rule any other GEMM's memory floor follows (docs/VALIDATION.md "Unfused attention as its kernels").
// Until 2026-12-01 the backward took 2.5 times the forward's FLOPs (a flash kernel's, which recomputes the scores)
// and eight passes.
#pragma once
#include <vector>

#include "core/op.hpp"

namespace twin {

struct UnfusedAttentionKernel {
  double flops = 0;         // a batched GEMM's; 0 for the softmax and dropout kernels
  double score_bytes = 0;   // its passes over the scores
};

// The kernels of an unfused attention op (attention_forward or attention_backward, AttentionShape::flash false), in
// launch order; the dropout kernel where AttentionShape::dropout.
std::vector<UnfusedAttentionKernel> unfused_attention_kernels(const Op& op);

// Their traffic over the scores, all kernels together.
double unfused_attention_score_bytes(const Op& op);

}  // namespace twin
