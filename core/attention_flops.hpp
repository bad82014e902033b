// An attention kernel's FLOPs, as the op vocabulary counts them (the lowering's attention ops, calibration's attention
// load): Q K^T and P V over the scores the kernel computes, 2 b h s_q s_kv (d + d_v) times the share
// attention_score_fraction keeps (core/op.hpp); the backward's five products 2.5 times the forward's two.
#pragma once
#include "core/op.hpp"

namespace twin {

inline double attention_flops(const AttentionShape& a, bool backward) {
  return 2.0 * static_cast<double>(a.batch) * static_cast<double>(a.heads) * static_cast<double>(a.seq_q) *
         static_cast<double>(a.seq_kv) * static_cast<double>(a.head_dim + value_head_dim(a)) *
         attention_score_fraction(a) * (backward ? 2.5 : 1.0);
}

}  // namespace twin
