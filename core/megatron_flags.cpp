// The table: argparse's declarations at kMegatronCommit, each with its file and line (arguments.py's own, or the
// dataclass field ArgumentGroupFactory turns into the flag; tools/megatron_flag_facts.py reads them). The rules:
// validate_args's asserts and TransformerConfig.__post_init__'s errors that twin's arguments could meet.
#include "core/megatron_flags.hpp"

#include <charconv>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/pipeline_layout.hpp"

namespace twin {

const std::vector<MegatronFlag>& megatron_flags() {
  using K = MegatronFlagKind;
  // --cp-comm-type: argparse takes any string; its help text and TransformerConfig name these four.
  // --moe-layer-freq: moe_freq_type, an integer or a Python list expression (which twin does not read).
  static const std::vector<MegatronFlag> table = {
      {"--tensor-model-parallel-size", K::integer, {}, false, "megatron/core/model_parallel_config.py:55"},
      {"--pipeline-model-parallel-size", K::integer, {}, false, "megatron/core/model_parallel_config.py:83"},
      {"--context-parallel-size", K::integer, {}, false, "megatron/core/model_parallel_config.py:100"},
      {"--expert-model-parallel-size", K::integer, {}, false, "megatron/core/model_parallel_config.py:127"},
      {"--expert-tensor-parallel-size", K::integer, {}, false, "megatron/core/model_parallel_config.py:130"},
      {"--sequence-parallel", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:94"},
      {"--cp-comm-type",
       K::choice,
       {"p2p", "a2a", "allgather", "a2a+p2p"},
       true,
       "megatron/training/arguments.py:3221"},
      {"--account-for-embedding-in-pipeline-split",
       K::switch_on,
       {},
       false,
       "megatron/core/transformer/transformer_config.py:137"},
      {"--account-for-loss-in-pipeline-split",
       K::switch_on,
       {},
       false,
       "megatron/core/transformer/transformer_config.py:141"},
      {"--num-layers-per-virtual-pipeline-stage", K::integer, {}, false, "megatron/training/arguments.py:3114"},
      {"--num-virtual-stages-per-pipeline-rank", K::integer, {}, false, "megatron/training/arguments.py:3116"},
      {"--pipeline-model-parallel-layout", K::layout, {}, false, "megatron/training/arguments.py:3103"},
      {"--micro-batch-size", K::integer, {}, false, "megatron/training/config/training_config.py:11"},
      {"--global-batch-size", K::integer, {}, false, "megatron/training/config/training_config.py:15"},
      {"--seq-length", K::integer, {}, false, "megatron/training/arguments.py:3305"},
      {"--num-layers", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:65"},
      {"--hidden-size", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:145"},
      {"--ffn-hidden-size", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:180"},
      {"--num-attention-heads", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:148"},
      {"--group-query-attention", K::switch_on, {}, false, "megatron/training/arguments.py:2382"},
      {"--num-query-groups", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:175"},
      {"--kv-channels", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:184"},
      {"--max-position-embeddings", K::integer, {}, false, "megatron/training/arguments.py:2394"},
      {"--position-embedding-type",
       K::choice,
       {"learned_absolute", "rope", "yarn", "mrope", "relative", "none"},
       false,
       "megatron/training/arguments.py:2397"},
      {"--rotary-base", K::integer, {}, false, "megatron/training/arguments.py:2418"},
      {"--normalization",
       K::choice,
       {"LayerNorm", "RMSNorm"},
       false,
       "megatron/core/transformer/transformer_config.py:256"},
      {"--swiglu", K::switch_on, {}, false, "megatron/training/arguments.py:2450"},
      {"--squared-relu", K::switch_on, {}, false, "megatron/training/arguments.py:2448"},
      {"--quick-geglu", K::switch_on, {}, false, "megatron/training/arguments.py:2452"},
      {"--glu-linear-offset", K::real, {}, false, "megatron/core/transformer/transformer_config.py:231"},
      {"--activation-func-clamp-value", K::real, {}, false, "megatron/core/transformer/transformer_config.py:235"},
      {"--untie-embeddings-and-output-weights", K::switch_on, {}, false, "megatron/training/arguments.py:2460"},
      {"--disable-bias-linear", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:212"},
      {"--hidden-dropout", K::real, {}, false, "megatron/core/transformer/transformer_config.py:188"},
      {"--attention-dropout", K::real, {}, false, "megatron/core/transformer/transformer_config.py:191"},
      {"--attention-backend",
       K::choice,
       {"flash", "fused", "unfused", "local", "auto"},
       false,
       "megatron/core/transformer/transformer_config.py:151"},
      {"--vocab-size", K::integer, {}, false, "megatron/training/config/training_config.py:679"},
      {"--num-experts", K::integer, {}, false, "megatron/training/arguments.py:3518"},
      {"--moe-router-topk", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:760"},
      {"--moe-ffn-hidden-size", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:740"},
      {"--moe-layer-freq", K::frequency, {}, false, "megatron/training/arguments.py:3520"},
      {"--moe-shared-expert-intermediate-size",
       K::integer,
       {},
       false,
       "megatron/core/transformer/transformer_config.py:701"},
      {"--multi-latent-attention", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:288"},
      {"--q-lora-rank", K::integer, {}, false, "megatron/training/arguments.py:3548"},
      {"--kv-lora-rank", K::integer, {}, false, "megatron/training/arguments.py:3550"},
      {"--qk-head-dim", K::integer, {}, false, "megatron/training/arguments.py:3552"},
      {"--qk-pos-emb-head-dim", K::integer, {}, false, "megatron/training/arguments.py:3554"},
      {"--v-head-dim", K::integer, {}, false, "megatron/training/arguments.py:3556"},
      {"--qk-layernorm", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:259"},
      {"--mtp-num-layers", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:68"},
      {"--window-size", K::integers, {}, false, "megatron/training/arguments.py:2384"},
      {"--window-attn-skip-freq", K::frequency, {}, false, "megatron/training/arguments.py:2387"},
      {"--softmax-type",
       K::choice,
       {"vanilla", "off-by-one", "learnable"},
       false,
       "megatron/core/transformer/transformer_config.py:170"},
      {"--moe-token-dispatcher-type",
       K::choice,
       {"allgather", "alltoall", "flex"},
       false,
       "megatron/core/transformer/transformer_config.py:891"},
      {"--moe-grouped-gemm", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:850"},
      {"--moe-router-load-balancing-type",
       K::choice,
       {"aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "quantile_balancing", "none"},
       true,
       "megatron/training/arguments.py:3532"},
      {"--moe-aux-loss-coeff", K::real, {}, true, "megatron/training/arguments.py:3536"},
      {"--moe-router-enable-expert-bias", K::switch_on, {}, false,
       "megatron/core/transformer/transformer_config.py:816"},
      {"--moe-router-score-function",
       K::choice,
       {"softmax", "sigmoid", "sqrtsoftplus"},
       false,
       "megatron/core/transformer/transformer_config.py:808"},
      {"--moe-router-pre-softmax", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:799"},
      {"--moe-router-topk-scaling-factor", K::real, {}, false, "megatron/core/transformer/transformer_config.py:804"},
      {"--moe-router-bias-update-rate", K::real, {}, false, "megatron/core/transformer/transformer_config.py:821"},
      {"--moe-router-num-groups", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:780"},
      {"--moe-router-group-topk", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:796"},
      {"--moe-router-force-load-balancing", K::switch_on, {}, false,
       "megatron/core/transformer/transformer_config.py:833"},
      {"--moe-expert-capacity-factor", K::real, {}, false, "megatron/core/transformer/transformer_config.py:917"},
      {"--moe-pad-expert-input-to-capacity", K::switch_on, {}, false,
       "megatron/core/transformer/transformer_config.py:921"},
      {"--bf16", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:180"},
      {"--fp16", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:177"},
      {"--grad-reduce-in-bf16", K::switch_on, {}, false, "megatron/training/arguments.py:3053"},
      {"--fp8-format", K::choice, {"e4m3", "hybrid"}, false, "megatron/core/transformer/transformer_config.py:587"},
      {"--fp8-recipe",
       K::choice,
       {"tensorwise", "delayed", "mxfp8", "blockwise", "custom"},
       false,
       "megatron/core/transformer/transformer_config.py:594"},
      {"--fp8-param-gather", K::switch_on, {}, false, "megatron/training/arguments.py:2016"},
      {"--no-fp8-wgrad", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:631"},
      {"--fp8-amax-history-len", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:621"},
      {"--first-last-layers-bf16", K::switch_on, {}, false, "megatron/core/transformer/transformer_config.py:649"},
      {"--num-layers-at-start-in-bf16", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:652"},
      {"--num-layers-at-end-in-bf16", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:656"},
      {"--optimizer",
       K::choice,
       {"adam", "sgd", "muon", "dist_muon", "lion", "soap", "adaptive_muon"},
       false,
       "megatron/training/arguments.py:2913"},
      {"--lr", K::real, {}, false, "megatron/training/arguments.py:2984"},
      {"--min-lr", K::real, {}, false, "megatron/training/arguments.py:2991"},
      {"--lr-decay-style",
       K::choice,
       {"constant", "linear", "cosine", "inverse-square-root", "WSD"},
       false,
       "megatron/training/config/training_config.py:169"},
      {"--lr-warmup-iters", K::integer, {}, false, "megatron/training/config/training_config.py:190"},
      {"--lr-decay-iters", K::integer, {}, false, "megatron/training/config/training_config.py:175"},
      {"--train-iters", K::integer, {}, false, "megatron/training/config/training_config.py:64"},
      {"--clip-grad", K::real, {}, false, "megatron/training/arguments.py:2615"},
      {"--use-precision-aware-optimizer", K::switch_on, {}, false, "megatron/training/arguments.py:3667"},
      {"--main-params-dtype", K::choice, {"fp32", "fp16"}, false, "megatron/training/arguments.py:3673"},
      {"--exp-avg-dtype", K::choice, {"fp32", "fp16", "bf16", "fp8"}, false, "megatron/training/arguments.py:3675"},
      {"--exp-avg-sq-dtype", K::choice, {"fp32", "fp16", "bf16", "fp8"}, false, "megatron/training/arguments.py:3680"},
      {"--recompute-granularity",
       K::choice,
       {"full", "selective"},
       false,
       "megatron/core/transformer/transformer_config.py:532"},
      {"--recompute-method",
       K::choice,
       {"uniform", "block"},
       false,
       "megatron/core/transformer/transformer_config.py:543"},
      {"--recompute-num-layers", K::integer, {}, false, "megatron/core/transformer/transformer_config.py:551"},
      // A List[str] field: argparse takes any names and TransformerConfig checks them (:1958); these are the ones twin
      // models (Megatron's others, gdn_norm_out, gdp_in_proj, gdp_qkv and mhc, recompute layers twin does not have).
      {"--recompute-modules",
       K::choice,
       {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"},
       true,
       "megatron/core/transformer/transformer_config.py:560"},
      {"--use-distributed-optimizer", K::switch_on, {}, false, "megatron/training/arguments.py:3156"},
      {"--use-megatron-fsdp", K::switch_on, {}, false, "megatron/training/config/common_config.py:92"},
      {"--data-parallel-sharding-strategy",
       K::choice,
       {"no_shard", "optim", "optim_grads", "optim_grads_params"},
       false,
       "megatron/training/arguments.py:3190"},
      {"--ckpt-format",
       K::choice,
       {"torch", "torch_dist", "torch_dcp", "fsdp_dtensor"},
       false,
       "megatron/training/config/training_config.py:486"},
      {"--overlap-grad-reduce", K::switch_on, {}, false, "megatron/training/arguments.py:3121"},
      {"--overlap-param-gather", K::switch_on, {}, false, "megatron/training/arguments.py:3148"},
      {"--tp-comm-overlap", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:265"},
      {"--no-gradient-accumulation-fusion", K::switch_on, {}, false, "megatron/training/arguments.py:2944"},
      {"--no-bias-dropout-fusion", K::switch_on, {}, false, "megatron/training/arguments.py:2899"},
      {"--cross-entropy-loss-fusion", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:320"},
      {"--overlap-moe-expert-parallel-comm", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:343"},
      {"--delay-wgrad-compute", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:348"},
      {"--defer-embedding-wgrad-compute", K::switch_on, {}, false, "megatron/core/model_parallel_config.py:410"},
      {"--wgrad-deferral-limit", K::integer, {}, false, "megatron/core/model_parallel_config.py:415"},
  };
  return table;
}

const MegatronFlag* find_megatron_flag(std::string_view name) {
  for (const MegatronFlag& flag : megatron_flags())
    if (flag.name == name) return &flag;
  return nullptr;
}

std::optional<long long> parse_integer_text(const std::string& text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

namespace {

std::optional<long long> parse_integer(const std::string& text) { return parse_integer_text(text); }

// moe_freq_type's list form, as twin writes it: brackets, parentheses, digits, '*', '+' and ',' only, brackets and
// parentheses balanced (Megatron evaluates it as Python).
bool is_layer_pattern(const std::string& text) {
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '(') ++depth;
    else if (c == ']' || c == ')') --depth;
    else if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '*' || c == '+' || c == ',')) return false;
    if (depth < 0) return false;
  }
  return depth == 0 && !text.empty() && text.front() != ',' && text.find('[') != std::string::npos;
}

// Python's float(): a decimal or exponent form; "nan" and "inf" are refused here, being no probability or size.
std::optional<double> parse_real(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<std::string> value_error(const MegatronFlag& flag, const std::string& value) {
  switch (flag.kind) {
    case MegatronFlagKind::switch_on:
      return std::nullopt;
    case MegatronFlagKind::integer: {
      // argparse takes any integer; twin bounds them far inside 64-bit arithmetic (sizes, products, sums).
      constexpr long long kBound = 1LL << 40;
      const std::optional<long long> parsed = parse_integer(value);
      if (!parsed) return fmt::format("expected an integer, got \"{}\"", value);
      if (*parsed < -kBound || *parsed > kBound) return fmt::format("expected an integer within +-2^40, got {}", value);
      return std::nullopt;
    }
    case MegatronFlagKind::real:
      if (!parse_real(value)) return fmt::format("expected a number, got \"{}\"", value);
      return std::nullopt;
    case MegatronFlagKind::choice:
      for (std::string_view choice : flag.choices)
        if (choice == value) return std::nullopt;
      return fmt::format("expected one of {}, got \"{}\"", fmt::join(flag.choices, ", "), value);
    case MegatronFlagKind::frequency:
      if (parse_integer(value) || is_layer_pattern(value)) return std::nullopt;
      return fmt::format("expected an integer or a list pattern such as ([0]*3+[1]*58), got \"{}\"", value);
    case MegatronFlagKind::integers: {
      std::size_t start = 0;
      for (std::size_t comma = value.find(','); ; comma = value.find(',', start)) {
        if (!parse_integer(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start)))
          return fmt::format("expected integers separated by commas, got \"{}\"", value);
        if (comma == std::string::npos) return std::nullopt;
        start = comma + 1;
      }
    }
    case MegatronFlagKind::layout: {
      std::string expected;
      if (parse_pipeline_layout(value, expected)) return std::nullopt;
      return fmt::format("expected {}, got \"{}\"", expected, value);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> megatron_value_error(const MegatronArgument& argument) {
  const MegatronFlag* flag = find_megatron_flag(argument.flag);
  if (!flag) return std::nullopt;
  if (flag->kind == MegatronFlagKind::switch_on) {
    if (!argument.values.empty()) return fmt::format("expected no value, got \"{}\"", argument.values.front());
    return std::nullopt;
  }
  if (argument.values.empty()) return std::string("expected a value, got none");
  if (!flag->several && argument.values.size() > 1)
    return fmt::format("expected one value, got {} (\"{}\")", argument.values.size(), fmt::join(argument.values, " "));
  for (const std::string& value : argument.values)
    if (auto error = value_error(*flag, value)) return error;
  return std::nullopt;
}

const MegatronArgument* MegatronArguments::find(std::string_view flag) const {
  for (auto it = arguments_.rbegin(); it != arguments_.rend(); ++it)
    if (it->flag == flag) return &*it;
  return nullptr;
}

long long MegatronArguments::integer(std::string_view flag, long long absent) const {
  const MegatronArgument* a = find(flag);
  if (!a || a->values.empty()) return absent;
  return parse_integer(a->values.front()).value_or(absent);
}

double MegatronArguments::real(std::string_view flag, double absent) const {
  const MegatronArgument* a = find(flag);
  if (!a || a->values.empty()) return absent;
  return parse_real(a->values.front()).value_or(absent);
}

std::string MegatronArguments::text(std::string_view flag, std::string absent) const {
  const MegatronArgument* a = find(flag);
  if (!a || a->values.empty()) return absent;
  return a->values.front();
}

}  // namespace twin
