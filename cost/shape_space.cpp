// Keys are parsed field by field and checked by writing them again, so the parser never has to know
// which fields a kind carries: kernel_shape_key is the one definition.
#include "cost/shape_space.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "core/op_kinds.hpp"
#include "cost/attention_dropout.hpp"
#include "cost/profile.hpp"

namespace twin {
namespace {

std::optional<OpKind> compute_kind_named(std::string_view name) {
  for (int k = 0; k < static_cast<int>(OpKind::all_reduce); ++k) {
    const auto kind = static_cast<OpKind>(k);
    if (to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

// A key's `dropout=1`: attention that drops its probabilities (unfused: a dropout kernel over the scores; fused: the
// kernel's own draws), or an elementwise or embedding op's hidden dropout, whose probability the key does not state
// (any above 0 names the kernel; 0.1, Megatron's default, here).
void set_dropout(Op& op, bool dropout) {
  if (op_kind_traits(op.kind).pricing == OpPricing::attention && !op.attention.flash) op.attention.dropout = dropout;
  op.dropout = dropout ? 0.1f : 0.f;
}

// Sets the field `name` of `op` to `value`; false for a name no key uses.
bool set_field(Op& op, std::string_view name, std::int64_t value) {
  AttentionShape& a = op.attention;
  GemmShape& g = op.gemm;
  if (name == "rows") op.rows = value;
  else if (name == "cols") op.cols = value;
  else if (name == "gated") op.activation = value != 0 ? Activation::swiglu : Activation::gelu;  // unless named
  else if (name == "softcap" && op_kind_traits(op.kind).pricing == OpPricing::attention) a.softcapped = value != 0;
  else if (name == "softcap") op.softcapped_logits = value != 0;  // a loss's logits
  else if (name == "unfused") op.unfused_loss = value != 0;       // a loss in passes over fp32 logits
  else if (name == "sinks") a.sinks = value != 0;
  else if (name == "elements") op.elements = value;
  else if (name == "bytes") op.bytes = value;
  else if (name == "b") a.batch = value;
  else if (name == "h") a.heads = value;
  else if (name == "kvh") a.kv_heads = value;
  else if (name == "sq") a.seq_q = value;
  else if (name == "skv") a.seq_kv = value;
  else if (name == "d") a.head_dim = value;
  else if (name == "causal") a.causal = value != 0;
  else if (name == "flash") a.flash = value != 0;
  else if (name == "dropout") set_dropout(op, value != 0);
  else if (name == "cudnn") a.cudnn = value != 0;
  else if (name == "window" && value <= INT32_MAX) a.window = static_cast<std::int32_t>(value);
  else if (name == "dv" && value <= INT16_MAX) a.v_head_dim = static_cast<std::int16_t>(value);
  else if (name == "m") g.m = value;
  else if (name == "n") g.n = value;
  else if (name == "k") g.k = value;
  else if (name == "count" && value <= INT32_MAX) g.count = static_cast<std::int32_t>(value);
  else if (name == "ta") g.transpose_a = value != 0;
  else if (name == "tb") g.transpose_b = value != 0;
  else if (name == "residual") op.fuses_residual = value != 0;
  else if (name == "ln") op.normalization = value != 0 ? Normalization::layernorm : Normalization::rmsnorm;
  else if (name == "e5m2") g.e5m2 = value != 0;
  else return false;
  return true;
}

// Sets a dtype field: an optimizer state's storage ("main_params=bf16") or gradient ("grad=fp32"), a GEMM's inputs,
// an activation, a GEMM's output or an FP8 cast's recipe; false for a name or dtype no key uses.
bool set_dtype_field(Op& op, std::string_view name, std::string_view value) {
  if (name == "inputs") {  // a GEMM's operands ("inputs=fp8_per_tensor")
    for (GemmInputs inputs : {GemmInputs::fp8_per_tensor, GemmInputs::fp8_blockwise, GemmInputs::fp8_blockwise_1d,
                              GemmInputs::mxfp8})
      if (to_string(inputs) == value) {
        op.gemm.inputs = inputs;
        return true;
      }
    return false;
  }
  if (name == "activation") {  // GeGLU, quick GeGLU or squared ReLU ("activation=geglu"; absent: by `gated`)
    const auto activation = activation_from_string(value);
    if (activation) op.activation = *activation;
    return activation.has_value();
  }
  if (name == "output") {  // where a weight gradient's product goes ("output=added"; absent: written)
    for (GemmOutput output : {GemmOutput::written_fp32, GemmOutput::added, GemmOutput::added_fp32})
      if (to_string(output) == value) {
        op.gemm_output = output;
        return true;
      }
    return false;
  }
  if (name == "recipe") {  // an FP8 cast's recipe ("recipe=delayed"; absent: tensorwise)
    const auto recipe = fp8_recipe_from_string(value);
    if (recipe) op.fp8_recipe = *recipe;
    return recipe.has_value();
  }
  const auto dtype = state_dtype_from_string(value);
  if (!dtype) return false;
  if (name == "grad") {  // an optimizer step's main gradient ("grad=fp32"; absent: 16-bit)
    op.main_gradient_bytes = static_cast<std::int8_t>(bytes_of(*dtype));
    return true;
  }
  OptimizerPrecision& p = op.optimizer_precision;
  if (name == "main_params") p.main_params = *dtype;
  else if (name == "exp_avg") p.exp_avg = *dtype;
  else if (name == "exp_avg_sq") p.exp_avg_sq = *dtype;
  else return false;
  return true;
}

// Shapes are comparable only with the same kernel variant. A GEMM whose epilogue adds a residual stays
// comparable with plain GEMMs (the same main loop; its price adds the read of the residual); a norm backward
// that adds one is another kernel.
int variant(const Op& op) {
  if (shape_form(op.kind) == ShapeForm::gemm)
    return int(op.gemm.transpose_a) | int(op.gemm.transpose_b) << 1 | int(op.gemm.inputs) << 2 | int(op.gemm.e5m2) << 5;
  // Activations interpolate among their form's measurements (gated or not: the bytes they move), whichever function
  // each is: their keys tell them apart where a calibration timed them (kernel_shape_key), and a shape measured for
  // one function still carries the other's neighbourhood. A capped loss is another kernel (a tanh per logit in each
  // pass makes it compute-bound: 2.1-2.8x the plain loss on an H200, docs/ACCURACY.md "Head dims off the grid");
  // without capped measurements it is priced as the plain one (kernel_predictor.cpp).
  // The fields a variant reads are the op's own kind's: the lowering stamps the model's activation and attention
  // backend on every op, and a key names them only for its kind, so a GeLU or unfused-attention model's norms, losses
  // and embeddings must not differ from the measured shapes by them (until 2026-11-30 they did: every such op of a
  // GPT-style model fell back to the curves). A fused (cuDNN) and a flash attention op interpolate together: twin
  // calibrate times the executor's attention, cuDNN's, for both (its keys say flash), and a profile without measured
  // attention still prices each by its own curve (kernel_cost.cpp).
  const bool activation = op.kind == OpKind::activation_forward || op.kind == OpKind::activation_backward;
  const bool attention = op_kind_traits(op.kind).pricing == OpPricing::attention;
  return int(activation && is_gated(op.activation)) | int(attention && op.attention.causal) << 1 |
         int(attention && op.attention.flash) << 2 | int(attention && drops_attention_probabilities(op)) << 3 |
         int(op.fuses_residual) << 5 |
         int(attention && op.attention.window > 0) << 6 |  // a windowed kernel skips whole tiles: another variant
         int(op.normalization == Normalization::layernorm) << 7 |  // LayerNorm's kernels are not RMSNorm's
         int(op.fp8_recipe) << 8 |  // each FP8 recipe's cast is its own kernel (1 or 2 passes, per tensor or block)
         // hidden dropout draws or reads a mask: another kernel (attention's dropout is bit 3's, fused or not)
         int(op.dropout > 0 && op_kind_traits(op.kind).pricing != OpPricing::attention) << 10 |
         int(op.softcapped_logits) << 11 |
         int(attention && op.attention.softcapped) << 12 |  // a tanh per score: another kernel
         int(attention && op.attention.sinks) << 13 |  // the sinks' passes after the kernel
         int(op.unfused_loss) << 14 |  // Megatron's loss kernels over fp32 logits
         // AdamW and the norm's pass over an fp32 gradient: measured at 1.10-1.11x the 16-bit one's time where its
         // bytes say 1.13 (one H200, 2026-12-03), so its efficiency is its own
         int(op.kind == OpKind::optimizer_step && op.main_gradient_bytes == 4) << 15;
}

}  // namespace

std::optional<Op> with_16_bit_gradient(const Op& op) {
  if (op.kind != OpKind::optimizer_step || op.main_gradient_bytes != 4) return std::nullopt;
  Op narrower = op;
  narrower.main_gradient_bytes = 2;
  return narrower;
}

std::optional<Op> without_added_pass(const Op& op) {
  Op plain = op;
  if (op.softcapped_logits) plain.softcapped_logits = false;
  else if (op.attention.softcapped) plain.attention.softcapped = false;
  else if (op.attention.sinks) plain.attention.sinks = false;
  else return std::nullopt;
  return plain;
}

std::optional<Op> op_from_kernel_key(std::string_view key) {
  const auto colon = key.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto kind = compute_kind_named(key.substr(0, colon));
  if (!kind) return std::nullopt;
  Op op;
  op.kind = *kind;
  std::string_view fields = key.substr(colon + 1);
  while (!fields.empty()) {
    const auto comma = fields.find(',');
    const std::string_view field = fields.substr(0, comma);
    const auto equals = field.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    std::int64_t value = 0;
    const std::string_view number = field.substr(equals + 1);
    if (set_dtype_field(op, field.substr(0, equals), number)) {
      fields = comma == std::string_view::npos ? std::string_view{} : fields.substr(comma + 1);
      continue;
    }
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (error != std::errc() || end != number.data() + number.size() || value < 0) return std::nullopt;
    if (!set_field(op, field.substr(0, equals), value)) return std::nullopt;
    fields = comma == std::string_view::npos ? std::string_view{} : fields.substr(comma + 1);
  }
  if (kernel_shape_key(op) != key) return std::nullopt;
  return op;
}

std::vector<double> shape_octaves(const Op& op) {
  auto log2 = [](double v) { return std::log2(std::max(v, 1.0)); };
  switch (shape_form(op.kind)) {
    case ShapeForm::gemm: return {log2(op.gemm.m), log2(op.gemm.n), log2(op.gemm.k), log2(op.gemm.count)};
    case ShapeForm::attention: {
      // A flash kernel's work is its (batch x head) tiles over the sequences, each tile's speed set by the head
      // dim, which picks another tile shape (counted twice, MLA's d_qk and d_v once each: one octave of it moves
      // the efficiency like two of the rest); the key-value groups only share K and V loads. Chosen by
      // leave-one-out over a calibration's attention grid (docs/ACCURACY.md, "Attention off the grid"), checked on
      // twelve shapes measured apart.
      const AttentionShape& a = op.attention;
      return {log2(double(a.batch) * a.heads), log2(a.seq_q), log2(a.seq_kv),
              log2(a.head_dim) + log2(value_head_dim(a))};
    }
    // The state's storage and the gradient's type are a second axis: another recipe is priced from the measured ones
    // by its bytes.
    case ShapeForm::elements:
      return {log2(op.elements), log2(optimizer_bytes_per_parameter(op.optimizer_precision, op.main_gradient_bytes))};
    case ShapeForm::bytes: return {log2(op.bytes)};
    case ShapeForm::rows_cols: return {log2(op.rows), log2(op.cols)};
  }
  throw std::logic_error("shape_octaves: unknown shape form");
}

std::optional<double> squared_octave_distance(const Op& a, const Op& b) {
  if (a.kind != b.kind || variant(a) != variant(b)) return std::nullopt;
  const std::vector<double> x = shape_octaves(a), y = shape_octaves(b);
  double squared = 0;
  for (std::size_t i = 0; i < x.size(); ++i) squared += (x[i] - y[i]) * (x[i] - y[i]);
  return squared;
}

std::optional<InterpolatedLogRatio> interpolate_log_ratio(std::vector<std::pair<double, std::size_t>> by_distance,
                                                          std::size_t neighbours, double prior_weight,
                                                          const std::function<double(std::size_t)>& log_ratio) {
  if (by_distance.empty()) return std::nullopt;
  const std::size_t used = std::min(neighbours, by_distance.size());
  std::partial_sort(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(used), by_distance.end());
  if (by_distance.front().first == 0)
    return InterpolatedLogRatio{log_ratio(by_distance.front().second), by_distance.front().second};
  double weight_sum = prior_weight, log_ratio_sum = 0;
  for (std::size_t j = 0; j < used; ++j) {
    const auto [squared, i] = by_distance[j];
    weight_sum += 1.0 / squared;
    log_ratio_sum += log_ratio(i) / squared;
  }
  return InterpolatedLogRatio{log_ratio_sum / weight_sum, std::nullopt};
}

}  // namespace twin
