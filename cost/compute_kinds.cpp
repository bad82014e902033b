// What the cost layer needs of each compute kind beyond its row in core/op_kinds.hpp, in one place (issue 42: a new
// kind is filled in here once): the bytes it moves (memory_bound_bytes, cost/profile.hpp) and the key its kernel is
// measured and looked up under (kernel_shape_key).
//
// The bytes each kind priced by bandwidth moves: the rule per kind that docs/PROFILES.md "memory-bound ops" lists, a
// GEMM's operands and product (its memory floor), the unfused attention's score passes (cost/unfused_attention.hpp)
// and AdamW's bytes per parameter. cost/kernel_cost.cpp prices them over the HBM curve. Byte counts assume bf16
// activations (2 bytes) and fp32 optimizer state.
//
// The key: its kind and the shape fields that pick or time its kernel, in a fixed spelling that profiles store, so a
// key never changes for an op that did not change.
#include "cost/memory_bound_bytes.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/unfused_loss.hpp"
#include "cost/attention_dropout.hpp"
#include "cost/profile.hpp"
#include "cost/unfused_attention.hpp"

namespace twin {

namespace {

constexpr double kActivationBytes = 2;  // bf16

}  // namespace

// FP8 operands are 1 byte each; the product is written in bf16.
double gemm_bytes(const GemmShape& g) {
  const double operand_bytes = is_fp8(g) ? 1 : kActivationBytes;
  return (operand_bytes * (double(g.m) * g.k + double(g.k) * g.n) + kActivationBytes * double(g.m) * g.n) * g.count;
}
// A GEMM whose epilogue adds the residual stream reads one more m x n tensor. A weight gradient written into, or added
// to, an fp32 buffer writes 4 bytes an element where gemm_bytes counts 2. Its read of the buffer it adds to (C) is not
// priced: cuBLASLt's epilogue loads C while the main loop runs, and on an H200 adding to a bf16 buffer cost 0.4% of the
// product, the bytes' price 2.8% (twelve weight-gradient shapes, tests/gpu/accumulating_gemm_probe.py: docs/ACCURACY.md
// "Weight gradients that accumulate"); the residual's read keeps its price from before that measurement.
double epilogue_addend_bytes(const Op& op) {
  const GemmShape& g = op.gemm;
  const double elements = double(g.m) * g.n * g.count;
  const double residual = op.fuses_residual ? kActivationBytes * elements : 0;
  switch (op.gemm_output) {
    case GemmOutput::written:
    case GemmOutput::added: return residual;
    case GemmOutput::written_fp32:
    case GemmOutput::added_fp32: return residual + (4 - kActivationBytes) * elements;
  }
  return residual;
}

// AdamW per parameter: the master weight, m and v read and written (24 in fp32; optimizer_precision can store
// them narrower, and without a master copy the bf16 parameter is read instead), the main gradient read in its own
// type (2 or 4: framework.main_grad_dtype), the bf16 parameter written (2), and the grad-norm pass reading the
// gradient once more (2 or 4). Until 2026-12-03 the gradient read was counted 4 and the norm's 2 whatever the type.
double optimizer_bytes_per_parameter(const OptimizerPrecision& p, int main_gradient_bytes) {
  const double master = master_bytes(p) > 0 ? 2.0 * master_bytes(p) : 2;  // no master: the bf16 parameter read
  return master + 2.0 * bytes_of(p.exp_avg) + 2.0 * bytes_of(p.exp_avg_sq) + 2.0 * main_gradient_bytes + 2;
}

double memory_bound_bytes(const Op& op) {
  if (op.is_communication())
    throw std::logic_error(fmt::format("memory_bound_bytes called for communication op {}", op_name(op)));
  const double elements = double(op.rows) * op.cols;
  // By the fields that state the op's size (core/op_kinds.hpp ShapeForm); rows x cols kinds by the rule below.
  switch (shape_form(op.kind)) {
    case ShapeForm::gemm: return gemm_bytes(op.gemm) + epilogue_addend_bytes(op);
    case ShapeForm::attention:
      return op.attention.flash ? 0 : unfused_attention_score_bytes(op);  // its kernels' passes over the scores
    case ShapeForm::elements:
      return optimizer_bytes_per_parameter(op.optimizer_precision, op.main_gradient_bytes) * op.elements;
    case ShapeForm::bytes:  // an FP8 transpose: the gathered rows read and their transpose written, a byte each
      return op.bytes;
    case ShapeForm::rows_cols: break;
  }
  if (op.bytes > 0) return op.bytes;  // the lowering knows better than the shape rule
  switch (op.kind) {
    case OpKind::norm_forward: return 2 * kActivationBytes * elements;      // read x, write y
    case OpKind::norm_backward:                                             // read x, dy (+ skip); write dx
      return (op.fuses_residual ? 4 : 3) * kActivationBytes * elements;
    case OpKind::rope_forward:
    case OpKind::rope_backward: return 2 * kActivationBytes * elements;     // read and write q, k (cols spans both)
    case OpKind::activation_forward:                                        // SwiGLU: read gate and up, write one
      return (is_gated(op.activation) ? 3 : 2) * kActivationBytes * elements;
    case OpKind::activation_backward:                                       // SwiGLU: read 2 + dy, write 2
      return (is_gated(op.activation) ? 5 : 3) * kActivationBytes * elements;
    case OpKind::embedding_forward:  // gather rows, write them; hidden dropout: read and write them, write the mask
      return (2 * kActivationBytes + (op.dropout > 0 ? 2 * kActivationBytes + 1 : 0)) * elements;
    case OpKind::embedding_backward:  // read dy, add into the fp32 grad; hidden dropout: read dy, the mask, write dy
      return (kActivationBytes + 2 * 4 + (op.dropout > 0 ? 2 * kActivationBytes + 1 : 0)) * elements;
    case OpKind::loss_forward:  // fused: read the logits once; unfused: its passes over fp32 logits
      return (op.unfused_loss ? sum_of(kUnfusedLossForwardBytesPerLogit) : kActivationBytes) * elements;
    case OpKind::loss_backward:  // fused: read logits, write their grad; unfused: its passes
      return (op.unfused_loss ? sum_of(kUnfusedLossBackwardBytesPerLogit) : 2 * kActivationBytes) * elements;
    // Priced by their own fields above; communication never gets here (require_compute).
    case OpKind::gemm:
    case OpKind::moe_router:
    case OpKind::attention_forward:
    case OpKind::attention_backward:
    case OpKind::optimizer_step:
    case OpKind::elementwise:
    case OpKind::moe_permute:
    case OpKind::moe_unpermute:
    case OpKind::fp8_cast:
    case OpKind::fp8_transpose:
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
    case OpKind::send:
    case OpKind::recv: break;
  }
  return 0;
}

namespace {

std::string gemm_key(const std::string& kind, const Op& op) {
  const GemmShape& g = op.gemm;
  return fmt::format("{}:m={},n={},k={},count={},ta={},tb={}{}{}{}{}{}", kind, g.m, g.n, g.k, g.count,
                     int(g.transpose_a), int(g.transpose_b),
                     g.split > 1 ? fmt::format(",split={}", g.split) : std::string(),
                     op.fuses_residual ? ",residual=1" : "",
                     g.busiest > 0 && g.count > 1 ? fmt::format(",busiest={}", g.busiest) : std::string(),
                     is_fp8(g) ? fmt::format(",inputs={},e5m2={}", to_string(g.inputs), int(g.e5m2)) : std::string(),
                     op.gemm_output != GemmOutput::written ? ",output=" + to_string(op.gemm_output) : std::string());
}

std::string attention_key(const std::string& kind, const Op& op) {
  const AttentionShape& a = op.attention;
  return fmt::format("{}:b={},h={},kvh={},sq={},skv={},d={},causal={},flash={}{}{}{}{}{}{}", kind, a.batch, a.heads,
                     a.kv_heads, a.seq_q, a.seq_kv, a.head_dim, int(a.causal), int(a.flash),
                     drops_attention_probabilities(op) ? ",dropout=1" : "", a.cudnn ? ",cudnn=1" : "",
                     a.window > 0 ? fmt::format(",window={}", a.window) : std::string(),
                     a.softcapped ? ",softcap=1" : "", a.sinks ? ",sinks=1" : "",
                     a.v_head_dim > 0 && a.v_head_dim != a.head_dim ? fmt::format(",dv={}", a.v_head_dim)
                                                                   : std::string());
}

// A 16-bit gradient and fp32 state key as before either was in the key.
std::string optimizer_key(const std::string& kind, const Op& op) {
  const OptimizerPrecision& p = op.optimizer_precision;
  const std::string state = p.is_default() ? std::string()
                                           : fmt::format(",main_params={},exp_avg={},exp_avg_sq={}",
                                                         to_string(p.main_params), to_string(p.exp_avg),
                                                         to_string(p.exp_avg_sq));
  return fmt::format("{}:elements={}{}{}", kind, op.elements, state, op.main_gradient_bytes == 4 ? ",grad=fp32" : "");
}

}  // namespace

std::string kernel_shape_key(const Op& op) {
  if (op.is_communication())
    throw std::logic_error(fmt::format("kernel_shape_key called for communication op {}", op_name(op)));
  const std::string kind = to_string(op.kind);
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::moe_router: return gemm_key(kind, op);
    case OpKind::attention_forward:
    case OpKind::attention_backward: return attention_key(kind, op);
    case OpKind::optimizer_step: return optimizer_key(kind, op);
    case OpKind::elementwise:  // hidden dropout is another kernel (the mask drawn, or read): its ops key as before it
      return fmt::format("{}:bytes={}{}", kind, op.bytes, op.dropout > 0 ? ",dropout=1" : "");
    case OpKind::moe_permute:
    case OpKind::moe_unpermute:
    case OpKind::fp8_transpose:  // a byte per element each way, whatever the recipe that scaled it
      return fmt::format("{}:bytes={}", kind, op.bytes);
    case OpKind::fp8_cast:  // the recipe names the kernel; tensorwise keys as before the recipe was in the key
      return fmt::format("{}:bytes={}{}", kind, op.bytes,
                         op.fp8_recipe == Fp8Recipe::tensorwise ? "" : ",recipe=" + to_string(op.fp8_recipe));
    case OpKind::activation_forward:
    case OpKind::activation_backward:
      // SwiGLU and GeLU key as before the activation was in the key; GeGLU, quick GeGLU and squared ReLU name
      // theirs.
      return fmt::format("{}:rows={},cols={},gated={}{}", kind, op.rows, op.cols, int(is_gated(op.activation)),
                         op.activation == Activation::swiglu || op.activation == Activation::gelu
                             ? std::string()
                             : ",activation=" + to_string(op.activation));
    case OpKind::loss_forward:
    case OpKind::loss_backward:  // soft-capped logits: a tanh per logit in the same passes; unfused: other kernels
      return fmt::format("{}:rows={},cols={}{}{}", kind, op.rows, op.cols, op.softcapped_logits ? ",softcap=1" : "",
                         op.unfused_loss ? ",unfused=1" : "");
    case OpKind::norm_forward:
    case OpKind::norm_backward:  // LayerNorm is another kernel (mean, bias); RMSNorm keys are as before it
      return fmt::format("{}:rows={},cols={}{}{}", kind, op.rows, op.cols, op.fuses_residual ? ",residual=1" : "",
                         op.normalization == Normalization::layernorm ? ",ln=1" : "");
    case OpKind::embedding_forward:  // with hidden dropout over its rows (keyed as before it without)
    case OpKind::embedding_backward:
      return fmt::format("{}:rows={},cols={}{}", kind, op.rows, op.cols, op.dropout > 0 ? ",dropout=1" : "");
    case OpKind::rope_forward:
    case OpKind::rope_backward:
    case OpKind::all_reduce:
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
    case OpKind::send:
    case OpKind::recv:
      return fmt::format("{}:rows={},cols={}{}", kind, op.rows, op.cols, op.fuses_residual ? ",residual=1" : "");
  }
}

}  // namespace twin
