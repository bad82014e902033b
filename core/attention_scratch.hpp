// The scratch an attention backward allocates beside its inputs and outputs, by the implementation that runs it
// (core/attention_implementation.hpp; gpu/attention.cpp allocates it for the duration of the backward). Measured on
// one H200 with cuDNN 9 (tests/gpu/attention_workspace_test.cpp, 2026-12-04, exact to cuDNN's 256-byte alignment
// over ten shapes: batch, heads, GQA, sequence 1,024-8,192, head dim 64 and 128, causal or not):
//   every implementation: the row sums rowsum(dO * O), fp32, batch x heads x seq_q;
//   cudnn: the fp32 dQ it accumulates with atomics, batch x seq_q x heads x head_dim;
//   cudnn_deterministic: cuDNN's dP workspace, bf16 scores, batch x heads x seq_q x seq_kv (causal or not), and no
//     fp32 dQ: at sequence 4,096 and head dim 128 sixteen times the default's scratch;
//   both cuDNN engines under GQA (fewer key-value heads than query heads): an fp32 buffer of batch x seq_kv x heads x
//     head_dim, dK and dV per query head before their sum over the group;
//   kernels: the row sums only.
#pragma once
#include <cstdint>

#include "core/attention_implementation.hpp"
#include "core/op.hpp"

namespace twin {

inline std::int64_t attention_backward_scratch_bytes(AttentionImplementation implementation, const AttentionShape& a) {
  const std::int64_t rows = a.batch * a.heads * a.seq_q * 4;
  const bool grouped_query = a.kv_heads > 0 && a.kv_heads < a.heads;
  const std::int64_t per_head_kv_gradients = grouped_query ? a.batch * a.seq_kv * a.heads * a.head_dim * 4 : 0;
  switch (implementation) {
    case AttentionImplementation::cudnn:
      return rows + a.batch * a.seq_q * a.heads * a.head_dim * 4 + per_head_kv_gradients;
    case AttentionImplementation::cudnn_deterministic:
      return rows + a.batch * a.heads * a.seq_q * a.seq_kv * 2 + per_head_kv_gradients;
    case AttentionImplementation::kernels: return rows;
  }
  return rows;
}

}  // namespace twin
