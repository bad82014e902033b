// The key a compute op's kernel is measured and looked up under (cost/profile.hpp): its kind and the shape fields
// that pick or time its kernel, in a fixed spelling that profiles store, so a key never changes for an op that did
// not change.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "cost/attention_dropout.hpp"
#include "cost/profile.hpp"

namespace twin {

std::string kernel_shape_key(const Op& op) {
  if (op.is_communication())
    throw std::logic_error(fmt::format("kernel_shape_key called for communication op {}", op_name(op)));
  const std::string kind = to_string(op.kind);
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::moe_router: {
      const GemmShape& g = op.gemm;
      return fmt::format("{}:m={},n={},k={},count={},ta={},tb={}{}{}{}{}{}", kind, g.m, g.n, g.k, g.count,
                         int(g.transpose_a), int(g.transpose_b),
                         g.split > 1 ? fmt::format(",split={}", g.split) : std::string(),
                         op.fuses_residual ? ",residual=1" : "",
                         g.busiest > 0 && g.count > 1 ? fmt::format(",busiest={}", g.busiest) : std::string(),
                         is_fp8(g) ? fmt::format(",inputs={},e5m2={}", to_string(g.inputs), int(g.e5m2)) : std::string(),
                         op.gemm_output != GemmOutput::written ? ",output=" + to_string(op.gemm_output) : std::string());
    }
    case OpKind::attention_forward:
    case OpKind::attention_backward: {
      const AttentionShape& a = op.attention;
      return fmt::format("{}:b={},h={},kvh={},sq={},skv={},d={},causal={},flash={}{}{}{}{}{}{}", kind, a.batch, a.heads,
                         a.kv_heads, a.seq_q, a.seq_kv, a.head_dim, int(a.causal), int(a.flash),
                         drops_attention_probabilities(op) ? ",dropout=1" : "", a.cudnn ? ",cudnn=1" : "",
                         a.window > 0 ? fmt::format(",window={}", a.window) : std::string(),
                         a.softcapped ? ",softcap=1" : "", a.sinks ? ",sinks=1" : "",
                         a.v_head_dim > 0 && a.v_head_dim != a.head_dim ? fmt::format(",dv={}", a.v_head_dim)
                                                                       : std::string());
    }
    case OpKind::optimizer_step: {  // a 16-bit gradient and fp32 state key as before either was in the key
      const OptimizerPrecision& p = op.optimizer_precision;
      const std::string state = p.is_default() ? std::string()
                                               : fmt::format(",main_params={},exp_avg={},exp_avg_sq={}",
                                                             to_string(p.main_params), to_string(p.exp_avg),
                                                             to_string(p.exp_avg_sq));
      return fmt::format("{}:elements={}{}{}", kind, op.elements, state, op.main_gradient_bytes == 4 ? ",grad=fp32" : "");
    }
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
