#include "cost/unfused_attention.hpp"

#include <stdexcept>

namespace twin {

namespace {

constexpr double kScoreElementBytes = 2;  // fp16 or bf16 scores
constexpr double kDropoutPasses = 2.5;    // 2-byte reads and writes and a 1-byte mask

double score_elements(const AttentionShape& a) {
  return static_cast<double>(a.batch) * static_cast<double>(a.heads) * static_cast<double>(a.seq_q) *
         static_cast<double>(a.seq_kv);
}

}  // namespace

std::vector<UnfusedAttentionKernel> unfused_attention_kernels(const Op& op) {
  const AttentionShape& a = op.attention;
  if (a.flash || (op.kind != OpKind::attention_forward && op.kind != OpKind::attention_backward))
    throw std::logic_error("unfused_attention_kernels called for an op that is not unfused attention");
  const double elements = score_elements(a);
  const double pass = kScoreElementBytes * elements;
  const double over_head_dim = 2.0 * elements * static_cast<double>(a.head_dim);
  const double over_value_dim = 2.0 * elements * static_cast<double>(value_head_dim(a));
  const UnfusedAttentionKernel dropout{0, kDropoutPasses * pass};
  std::vector<UnfusedAttentionKernel> kernels;
  if (op.kind == OpKind::attention_forward) {
    kernels.push_back({over_head_dim, pass});  // Q K^T
    kernels.push_back({0, 2 * pass});          // softmax
    if (a.dropout) kernels.push_back(dropout);
    kernels.push_back({over_value_dim, pass});  // P V
    return kernels;
  }
  kernels.push_back({over_value_dim, pass});  // dP = dO V^T
  if (a.dropout) kernels.push_back(dropout);
  kernels.push_back({over_value_dim, pass});  // dV = P^T dO
  kernels.push_back({0, 3 * pass});           // softmax backward
  kernels.push_back({over_head_dim, pass});   // dQ = dS K
  kernels.push_back({over_head_dim, pass});   // dK = dS^T Q
  return kernels;
}

double unfused_attention_score_bytes(const Op& op) {
  double bytes = 0;
  for (const UnfusedAttentionKernel& kernel : unfused_attention_kernels(op)) bytes += kernel.score_bytes;
  return bytes;
}

}  // namespace twin
