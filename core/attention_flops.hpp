// An attention kernel's FLOPs, as the op vocabulary counts them (the lowering's attention ops, calibration's attention
// load, the cost model): Q K^T and P V over the scores the kernel computes, 2 b h s_q s_kv (d + d_v). A flash kernel
// computes the share attention_score_fraction keeps (core/op.hpp) and its backward's five products (the scores again,
// then dV, dP, dQ, dK) 2.5 times the forward's two; an unfused one computes every score and its backward four
// products (cost/unfused_attention.hpp), twice the forward's.
#pragma once
#include "core/op.hpp"

namespace twin {

inline double attention_flops(const AttentionShape& a, bool backward) {
  const double square = 2.0 * static_cast<double>(a.batch) * static_cast<double>(a.heads) *
                        static_cast<double>(a.seq_q) * static_cast<double>(a.seq_kv) *
                        static_cast<double>(a.head_dim + value_head_dim(a));
  if (!a.flash) return square * (backward ? 2.0 : 1.0);
  return square * attention_score_fraction(a) * (backward ? 2.5 : 1.0);
}

}  // namespace twin
