#include "cost/attention_dropout.hpp"

#include "core/op_kinds.hpp"

namespace twin {

bool drops_attention_probabilities(const Op& op) {
  return op_kind_traits(op.kind).pricing == OpPricing::attention && (op.attention.dropout || op.dropout > 0);
}

bool fused_attention_dropout(const Op& op) { return drops_attention_probabilities(op) && op.attention.flash; }

double fused_attention_dropout_ns(const Op& op, const GpuSpec& gpu, const GpuKernelProfile& kernels) {
  if (!fused_attention_dropout(op) || gpu.sm_count <= 0) return 0;
  const AttentionShape& a = op.attention;
  const double drawn = double(a.batch) * a.heads * a.seq_q * a.seq_kv * attention_score_fraction(a);
  const double cycles = op.kind == OpKind::attention_backward ? kAttentionDropoutBackwardSmCyclesPerElement
                                                              : kAttentionDropoutForwardSmCyclesPerElement;
  const double clock_MHz = kernels.attention_at_reference_clock && kernels.reference_sm_clock_MHz > 0
                               ? kernels.reference_sm_clock_MHz
                               : kAttentionDropoutMeasuredClockMHz;
  return drawn * cycles / (gpu.sm_count * clock_MHz * 1e-3);  // clock_MHz x 1e-3: cycles per ns
}

}  // namespace twin
