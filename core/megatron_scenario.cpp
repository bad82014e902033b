// The flags become the JSON of a scenario (model, training, framework, strategy) beside the base scenario's
// cluster, and that document is parsed as any scenario is, so that every check of the scenario format applies;
// an error there is told as the flag that set the offending field. Megatron's defaults for absent flags are those
// of megatron/training/arguments.py and its config dataclasses at kMegatronCommit (core/megatron_flags.cpp).
#include "core/megatron_scenario.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/moe_layer_pattern.hpp"
#include "core/pipeline_layout.hpp"

namespace twin {
namespace {

using nlohmann::json;

[[noreturn]] void refuse(const std::string& source, const std::string& flag, const std::string& what) {
  throw InputError(source, "", fmt::format("{}: {}", flag, what));
}

// The scenario document being written, and which flag set each field (to tell a parse error as that flag).
class Document {
 public:
  void set(const std::string& pointer, json value, const std::string& flag) {
    json_[json::json_pointer(pointer)] = std::move(value);
    flag_of_[pointer] = flag;
  }
  json& root() { return json_; }
  // The flag behind `pointer`, or behind the object holding it; "" when none set it.
  std::string flag_of(std::string pointer) const {
    for (;;) {
      if (auto it = flag_of_.find(pointer); it != flag_of_.end()) return it->second;
      const std::size_t slash = pointer.rfind('/');
      if (slash == std::string::npos || slash == 0) return "";
      pointer.resize(slash);
    }
  }

 private:
  json json_ = json::object();
  std::map<std::string, std::string> flag_of_;
};

struct Reading {
  const MegatronArguments& a;
  const Scenario& base;
  const std::string& source;
  Document doc;
  std::vector<std::string> not_modelled;

  long long required(const char* flag) const {
    if (!a.has(flag)) refuse(source, flag, "expected it: Megatron has no default for it");
    return a.integer(flag, 0);
  }
  void note(const std::string& text) { not_modelled.push_back(text); }
};

std::string given(const MegatronArgument& argument) {
  std::string text = argument.flag;
  for (const std::string& value : argument.values) text += " " + value;
  return text;
}

void read_model(Reading& r) {
  const MegatronArguments& a = r.a;
  const long long hidden = r.required("--hidden-size"), heads = r.required("--num-attention-heads");
  const bool swiglu = a.has("--swiglu");
  r.doc.set("/model/name", "Megatron-LM arguments", "--num-layers");
  r.doc.set("/model/num_layers", r.required("--num-layers"), "--num-layers");
  r.doc.set("/model/hidden_size", hidden, "--hidden-size");
  // Megatron's default width (arguments.py:1320): 4h, or two thirds of it rounded down to 64 for a gated MLP.
  const long long default_ffn = swiglu ? static_cast<long long>(4 * hidden * 2 / 3 / 64) * 64 : 4 * hidden;
  r.doc.set("/model/ffn_hidden_size", a.integer("--ffn-hidden-size", default_ffn), "--ffn-hidden-size");
  r.doc.set("/model/num_attention_heads", heads, "--num-attention-heads");
  // Without --group-query-attention Megatron ignores --num-query-groups (argument_utils.py:330).
  const bool gqa = a.has("--group-query-attention");
  r.doc.set("/model/num_query_groups", gqa ? a.integer("--num-query-groups", 1) : heads, "--num-query-groups");
  if (!gqa && a.has("--num-query-groups"))
    r.note(given(*a.find("--num-query-groups")) + ": ignored by Megatron without --group-query-attention");
  if (a.has("--kv-channels")) r.doc.set("/model/kv_channels", a.integer("--kv-channels", 0), "--kv-channels");
  if (a.has("--vocab-size"))
    r.doc.set("/model/vocab_size", a.integer("--vocab-size", 0), "--vocab-size");
  else
    r.doc.set("/model/vocab_size", r.base.model.vocab_size, "--vocab-size");
  r.doc.set("/model/max_position_embeddings", a.integer("--max-position-embeddings", 0), "--max-position-embeddings");
  const std::string positions = a.text("--position-embedding-type", "learned_absolute");
  if (positions != "rope" && positions != "learned_absolute")
    refuse(r.source, "--position-embedding-type",
           fmt::format("expected rope or learned_absolute (what twin models), got {}", positions));
  r.doc.set("/model/position_embedding_rope", positions == "rope", "--position-embedding-type");
  r.doc.set("/model/rotary_base", a.integer("--rotary-base", 10000), "--rotary-base");
  r.doc.set("/model/normalization", a.text("--normalization", "LayerNorm") == "RMSNorm" ? "rmsnorm" : "layernorm",
            "--normalization");
  // Megatron's order (argument_utils.py:321-326): squared ReLU before quick GeGLU.
  const bool quick_geglu = !a.has("--squared-relu") && a.has("--quick-geglu");
  const char* activation = swiglu                     ? "swiglu"
                           : a.has("--squared-relu")  ? "squared_relu"
                           : quick_geglu              ? "quick_geglu"
                                                      : "gelu";
  r.doc.set("/model/activation", activation, quick_geglu ? "--quick-geglu" : "--swiglu");
  if (a.has("--glu-linear-offset"))
    r.doc.set("/model/glu_linear_offset", a.real("--glu-linear-offset", 0.0), "--glu-linear-offset");
  if (a.has("--activation-func-clamp-value"))
    r.doc.set("/model/activation_func_clamp_value", a.real("--activation-func-clamp-value", 0.0),
              "--activation-func-clamp-value");
  r.doc.set("/model/untie_embeddings_and_output_weights", a.has("--untie-embeddings-and-output-weights"),
            "--untie-embeddings-and-output-weights");
  r.doc.set("/model/add_bias_linear", !a.has("--disable-bias-linear"), "--disable-bias-linear");
  r.doc.set("/model/hidden_dropout", a.real("--hidden-dropout", 0.1), "--hidden-dropout");
  r.doc.set("/model/attention_dropout", a.real("--attention-dropout", 0.1), "--attention-dropout");
  // auto: Transformer Engine picks; on Hopper it prefers cuDNN's fused attention. local is Megatron's unfused path.
  const std::string backend = a.text("--attention-backend", "auto");
  if (backend == "auto")
    r.note("--attention-backend auto (Megatron's default): priced as fused, Transformer Engine's choice on Hopper");
  r.doc.set("/model/attention_backend",
            backend == "auto"    ? "fused"
            : backend == "local" ? "unfused"
                                 : backend,
            "--attention-backend");
}

// The architecture variants megatron_args.txt writes (reports/megatron_args.cpp), read back; a window other than
// "W-1,0" (keys before, none after) and the off-by-one softmax are not modelled.
void read_model_variants(Reading& r) {
  const MegatronArguments& a = r.a;
  if (a.has("--qk-layernorm")) r.doc.set("/model/qk_layernorm", true, "--qk-layernorm");
  if (a.has("--mtp-num-layers")) r.doc.set("/model/mtp_num_layers", a.integer("--mtp-num-layers", 0), "--mtp-num-layers");
  if (a.has("--window-size")) {
    const std::string window = a.text("--window-size", "");
    const std::size_t comma = window.find(',');
    const auto before = parse_integer_text(window.substr(0, comma));
    if (comma == std::string::npos || !before || *before < 0 || window.substr(comma + 1) != "0")
      refuse(r.source, "--window-size", fmt::format("expected W,0 (a causal window of W + 1 keys), got {}", window));
    r.doc.set("/model/window_size", *before + 1, "--window-size");
  }
  if (a.has("--window-attn-skip-freq")) {
    const auto freq = parse_integer_text(a.text("--window-attn-skip-freq", ""));
    if (!freq) refuse(r.source, "--window-attn-skip-freq", "expected an integer: a list pattern is not read");
    r.doc.set("/model/window_attn_skip_freq", *freq, "--window-attn-skip-freq");
  }
  const std::string softmax = a.text("--softmax-type", "vanilla");
  if (softmax == "off-by-one")
    refuse(r.source, "--softmax-type", "expected vanilla or learnable: the off-by-one softmax is not modelled");
  if (softmax == "learnable") r.doc.set("/model/attention_sinks", true, "--softmax-type");
  if (a.has("--multi-latent-attention")) {
    r.doc.set("/model/mla/q_lora_rank", a.integer("--q-lora-rank", 0), "--q-lora-rank");
    r.doc.set("/model/mla/kv_lora_rank", a.integer("--kv-lora-rank", 32), "--kv-lora-rank");  // Megatron's defaults
    r.doc.set("/model/mla/qk_head_dim", a.integer("--qk-head-dim", 128), "--qk-head-dim");
    r.doc.set("/model/mla/qk_pos_emb_head_dim", a.integer("--qk-pos-emb-head-dim", 64), "--qk-pos-emb-head-dim");
    r.doc.set("/model/mla/v_head_dim", a.integer("--v-head-dim", 128), "--v-head-dim");
  }
}

// The router's flags as model.moe's router keys; Megatron's rules on them were checked (megatron_rules.cpp).
void read_router(Reading& r) {
  const MegatronArguments& a = r.a;
  const std::string score = a.text("--moe-router-score-function", "softmax");
  if (score == "sqrtsoftplus")
    refuse(r.source, "--moe-router-score-function", "expected softmax or sigmoid, got sqrtsoftplus (not modelled)");
  if (a.has("--moe-router-score-function"))
    r.doc.set("/model/moe/router_score_function", score, "--moe-router-score-function");
  if (a.has("--moe-router-pre-softmax")) r.doc.set("/model/moe/router_pre_softmax", true, "--moe-router-pre-softmax");
  if (a.has("--moe-router-topk-scaling-factor"))
    r.doc.set("/model/moe/router_topk_scaling_factor", a.real("--moe-router-topk-scaling-factor", 1.0),
              "--moe-router-topk-scaling-factor");
  if (a.has("--moe-router-enable-expert-bias"))
    r.doc.set("/model/moe/router_expert_bias", true, "--moe-router-enable-expert-bias");
  if (a.has("--moe-router-bias-update-rate"))
    r.doc.set("/model/moe/router_bias_update_rate", a.real("--moe-router-bias-update-rate", 1e-3),
              "--moe-router-bias-update-rate");
  if (a.has("--moe-router-num-groups"))
    r.doc.set("/model/moe/router_num_groups", a.integer("--moe-router-num-groups", 0), "--moe-router-num-groups");
  if (a.has("--moe-router-group-topk"))
    r.doc.set("/model/moe/router_group_topk", a.integer("--moe-router-group-topk", 0), "--moe-router-group-topk");
}

void read_moe(Reading& r) {
  const MegatronArguments& a = r.a;
  if (!a.has("--num-experts")) return;
  // Megatron's default expert TP is the TP size (validate_args, megatron/training/arguments.py at d98e8a64dd); the
  // scenario states it only where it is not twin's default, 1.
  const long long tp = a.integer("--tensor-model-parallel-size", 1);
  if (const long long etp = a.integer("--expert-tensor-parallel-size", tp); etp != 1)
    r.doc.set("/strategy/expert_tensor_parallel_size", etp, "--expert-tensor-parallel-size");
  r.doc.set("/model/moe/num_experts", a.integer("--num-experts", 0), "--num-experts");
  r.doc.set("/model/moe/top_k", a.integer("--moe-router-topk", 2), "--moe-router-topk");
  r.doc.set("/model/moe/ffn_hidden_size", r.doc.root()["model"]["ffn_hidden_size"], "--ffn-hidden-size");
  if (a.has("--moe-ffn-hidden-size"))
    r.doc.set("/model/moe/ffn_hidden_size", a.integer("--moe-ffn-hidden-size", 0), "--moe-ffn-hidden-size");
  if (a.has("--moe-layer-freq") && !parse_integer_text(a.text("--moe-layer-freq", "1"))) {
    MoeLayerLayout layout;
    try {
      layout = read_moe_layer_pattern(a.text("--moe-layer-freq", ""),
                                      static_cast<int>(a.integer("--num-layers", 0)));
    } catch (const std::invalid_argument& error) {
      refuse(r.source, "--moe-layer-freq", std::string("an integer or a list of 0 and 1 per layer: ") + error.what());
    }
    r.doc.set("/model/moe/first_dense_layers", layout.first_dense_layers, "--moe-layer-freq");
    r.doc.set("/model/moe/layer_freq", layout.layer_freq, "--moe-layer-freq");
  } else {
    r.doc.set("/model/moe/layer_freq", a.integer("--moe-layer-freq", 1), "--moe-layer-freq");
  }
  if (a.has("--moe-shared-expert-intermediate-size"))
    r.doc.set("/model/moe/shared_expert_ffn_hidden_size", a.integer("--moe-shared-expert-intermediate-size", 0),
              "--moe-shared-expert-intermediate-size");
  if (r.base.model.moe.routing_imbalance && !a.has("--moe-router-force-load-balancing") &&
      !a.has("--moe-router-enable-expert-bias"))
    r.doc.set("/model/moe/routing_imbalance", *r.base.model.moe.routing_imbalance, "--num-experts");
  else if (r.base.model.moe.routing && !a.has("--moe-router-force-load-balancing") &&
           !a.has("--moe-router-enable-expert-bias"))
    r.doc.set("/model/moe/routing", routing_json(*r.base.model.moe.routing), "--num-experts");
  const std::string dispatcher = a.text("--moe-token-dispatcher-type", "allgather");
  r.doc.set("/framework/moe_token_dispatcher_type", dispatcher, "--moe-token-dispatcher-type");
  // A negative factor is Megatron's way to say dropless (TransformerConfig.__post_init__).
  if (a.has("--moe-expert-capacity-factor") && a.real("--moe-expert-capacity-factor", -1.0) >= 0)
    r.doc.set("/model/moe/expert_capacity_factor", a.real("--moe-expert-capacity-factor", 1.0),
              "--moe-expert-capacity-factor");
  if (a.has("--moe-pad-expert-input-to-capacity"))
    r.doc.set("/model/moe/pad_expert_input_to_capacity", true, "--moe-pad-expert-input-to-capacity");
  if (a.has("--moe-router-force-load-balancing"))
    r.doc.set("/model/moe/routing", nlohmann::json{{"distribution", "forced"}}, "--moe-router-force-load-balancing");
  else if (a.has("--moe-router-enable-expert-bias"))
    r.doc.set("/model/moe/routing", nlohmann::json{{"distribution", "loss_free"}}, "--moe-router-enable-expert-bias");
  read_router(r);
  if (!a.has("--moe-grouped-gemm"))
    r.note("no --moe-grouped-gemm: the experts are priced as grouped GEMMs, not Megatron's loop over experts");
  const std::string balancing = a.text("--moe-router-load-balancing-type", "aux_loss");
  if (balancing != "aux_loss" && balancing != "seq_aux_loss" && balancing != "global_aux_loss" && balancing != "none")
    r.note("--moe-router-load-balancing-type " + balancing +
           ": priced as an auxiliary loss (its routing counts all-reduced over TP and CP)");
  // The loss's weight, Megatron's default 0 when absent or with no loss; several types' weights: the first's.
  const double weight = balancing == "none" ? 0.0 : a.real("--moe-aux-loss-coeff", 0.0);
  r.doc.set("/model/moe/aux_loss_coeff", weight, a.has("--moe-aux-loss-coeff") ? "--moe-aux-loss-coeff" : "--num-experts");
  if (balancing == "seq_aux_loss" || balancing == "global_aux_loss")
    r.note("--moe-router-load-balancing-type " + balancing + ": twin execute trains with the per-micro-batch aux_loss "
           "of that weight");
}

// --fp8-format and its companions as training.fp8 (absent: no FP8; the custom recipe names a Python factory
// twin cannot price).
void read_fp8(Reading& r) {
  const MegatronArguments& a = r.a;
  if (!a.has("--fp8-format")) return;
  const std::string recipe = a.text("--fp8-recipe", "delayed");
  if (recipe == "custom") refuse(r.source, "--fp8-recipe", "expected delayed, tensorwise, blockwise or mxfp8, got custom");
  r.doc.set("/training/fp8/format", a.text("--fp8-format", "hybrid"), "--fp8-format");
  r.doc.set("/training/fp8/recipe", recipe, "--fp8-recipe");
  r.doc.set("/training/fp8/param_gather", a.has("--fp8-param-gather"), "--fp8-param-gather");
  r.doc.set("/training/fp8/wgrad", !a.has("--no-fp8-wgrad"), "--no-fp8-wgrad");
  if (recipe == "delayed")
    r.doc.set("/training/fp8/amax_history_len", a.integer("--fp8-amax-history-len", 1), "--fp8-amax-history-len");
  const bool bf16_edges = a.has("--first-last-layers-bf16");
  r.doc.set("/training/fp8/first_last_layers_bf16", bf16_edges, "--first-last-layers-bf16");
  if (!bf16_edges) return;
  r.doc.set("/training/fp8/num_layers_at_start_in_bf16", a.integer("--num-layers-at-start-in-bf16", 1),
            "--num-layers-at-start-in-bf16");
  r.doc.set("/training/fp8/num_layers_at_end_in_bf16", a.integer("--num-layers-at-end-in-bf16", 1),
            "--num-layers-at-end-in-bf16");
}

// The learning-rate schedule and clipping as Megatron runs them (its defaults: a linear decay to --min-lr over
// --train-iters), when the command line gives --lr (Megatron requires it); schedules twin execute does not run
// and the sample-based flags are listed.
void read_recipe(Reading& r) {
  const MegatronArguments& a = r.a;
  if (a.has("--clip-grad")) r.doc.set("/training/clip_grad", a.real("--clip-grad", 1.0), "--clip-grad");
  if (!a.has("--lr")) return;
  r.doc.set("/training/lr", a.real("--lr", 3e-4), "--lr");
  if (a.has("--min-lr")) r.doc.set("/training/min_lr", a.real("--min-lr", 0), "--min-lr");
  const std::string style = a.text("--lr-decay-style", "linear");
  if (!lr_decay_style_from_string(style)) {
    r.note(given(*a.find("--lr-decay-style")) + ": twin execute runs constant, linear or cosine; not modelled");
    return;
  }
  r.doc.set("/training/lr_decay_style", style, "--lr-decay-style");
  if (a.has("--lr-warmup-iters"))
    r.doc.set("/training/lr_warmup_iters", a.integer("--lr-warmup-iters", 0), "--lr-warmup-iters");
  const char* decay = a.has("--lr-decay-iters") ? "--lr-decay-iters" : "--train-iters";
  if (a.has(decay)) r.doc.set("/training/lr_decay_iters", a.integer(decay, 1), decay);
}

void read_training(Reading& r) {
  const MegatronArguments& a = r.a;
  const long long seq = r.required("--seq-length"), micro = r.required("--micro-batch-size");
  const long long model_parallel = a.integer("--tensor-model-parallel-size", 1) *
                                   a.integer("--pipeline-model-parallel-size", 1) *
                                   a.integer("--context-parallel-size", 1);
  const long long data_parallel = r.base.cluster.total_gpus() / std::max(1LL, model_parallel);
  r.doc.set("/training/seq_length", seq, "--seq-length");
  // Megatron's default: one micro-batch per data-parallel rank (arguments.py:702).
  r.doc.set("/training/global_batch_size", a.integer("--global-batch-size", micro * data_parallel),
            "--global-batch-size");
  r.doc.set("/training/precision", a.has("--bf16") ? "bf16" : a.has("--fp16") ? "fp16" : "fp32", "--bf16");
  // bf16 training reduces its gradients in fp32 unless --grad-reduce-in-bf16 (arguments.py:1207-1216).
  if (a.has("--bf16"))
    r.doc.set("/framework/reduce_dtype", a.has("--grad-reduce-in-bf16") ? "bfloat16" : "float32", "--grad-reduce-in-bf16");
  read_fp8(r);
  const std::string optimizer = a.text("--optimizer", "adam");
  if (optimizer != "adam" && optimizer != "sgd")
    refuse(r.source, "--optimizer", fmt::format("expected adam or sgd (what twin models), got {}", optimizer));
  r.doc.set("/training/optimizer", optimizer, "--optimizer");
  read_recipe(r);
  const bool aware = a.has("--use-precision-aware-optimizer");
  for (const auto& [flag, key] :
       {std::pair{"--main-params-dtype", "main_params_dtype"}, std::pair{"--exp-avg-dtype", "exp_avg_dtype"},
        std::pair{"--exp-avg-sq-dtype", "exp_avg_sq_dtype"}}) {
    if (aware)
      r.doc.set(fmt::format("/training/{}", key), a.text(flag, "fp32"), flag);
    else if (a.has(flag))
      r.note(given(*a.find(flag)) + ": used by Megatron only with --use-precision-aware-optimizer");
  }
}

// ZeRO: Megatron-FSDP's sharding strategy, else the distributed optimizer (ZeRO 1) or none.
int zero_stage(const MegatronArguments& a) {
  if (a.has("--use-megatron-fsdp")) {
    const std::string sharding = a.text("--data-parallel-sharding-strategy", "optim_grads_params");
    return sharding == "optim_grads_params" ? 3 : sharding == "optim_grads" ? 2 : sharding == "optim" ? 1 : 0;
  }
  return a.has("--use-distributed-optimizer") ? 1 : 0;
}

void read_strategy(Reading& r) {
  const MegatronArguments& a = r.a;
  const long long tp = a.integer("--tensor-model-parallel-size", 1),
                  pp = a.integer("--pipeline-model-parallel-size", 1);
  r.doc.set("/strategy/tensor_model_parallel_size", tp, "--tensor-model-parallel-size");
  r.doc.set("/strategy/pipeline_model_parallel_size", pp, "--pipeline-model-parallel-size");
  r.doc.set("/strategy/context_parallel_size", a.integer("--context-parallel-size", 1), "--context-parallel-size");
  r.doc.set("/strategy/expert_model_parallel_size", a.integer("--expert-model-parallel-size", 1),
            "--expert-model-parallel-size");
  r.doc.set("/strategy/sequence_parallel", a.has("--sequence-parallel") && tp > 1, "--sequence-parallel");
  r.doc.set("/strategy/micro_batch_size", a.integer("--micro-batch-size", 1), "--micro-batch-size");
  r.doc.set("/strategy/zero_stage", zero_stage(a),
            a.has("--use-megatron-fsdp") ? "--data-parallel-sharding-strategy" : "--use-distributed-optimizer");
  // Virtual stages as validate_args derives them (arguments.py:958).
  long long layers = a.integer("--num-layers", 0);
  layers += a.has("--account-for-embedding-in-pipeline-split") + a.has("--account-for-loss-in-pipeline-split");
  long long virtual_stages = a.integer("--num-virtual-stages-per-pipeline-rank", 1);
  if (a.has("--num-layers-per-virtual-pipeline-stage"))
    virtual_stages = layers / pp / std::max(1LL, a.integer("--num-layers-per-virtual-pipeline-stage", 1));
  if (a.has("--pipeline-model-parallel-layout")) {  // validate_args: VP = the layout's stages / PP (arguments.py:941)
    const std::string layout = a.text("--pipeline-model-parallel-layout", "");
    for (const char* flag : {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"})
      if (a.has(flag))  // validate_args refuses both together: the layout states the virtual stages
        refuse(r.source, flag, "no virtual-stage flag beside --pipeline-model-parallel-layout (its '|' state them)");
    std::string expected;
    const std::optional<PipelineLayout> parsed = parse_pipeline_layout(layout, expected);
    if (!parsed) refuse(r.source, "--pipeline-model-parallel-layout", "expected " + expected);
    virtual_stages = std::max(1LL, parsed->virtual_stages() / std::max(1LL, pp));
    r.doc.set("/strategy/pipeline_model_parallel_layout", layout, "--pipeline-model-parallel-layout");
  }
  r.doc.set("/strategy/virtual_pipeline_model_parallel_size", virtual_stages,
            "--num-layers-per-virtual-pipeline-stage");
  r.doc.set("/strategy/schedule", virtual_stages > 1 ? "interleaved-1f1b" : "1f1b",
            "--num-layers-per-virtual-pipeline-stage");
  const std::string granularity = a.text("--recompute-granularity", "none");
  r.doc.set("/strategy/recompute", granularity, "--recompute-granularity");
  if (const MegatronArgument* modules = a.find("--recompute-modules")) {  // TransformerConfig reads them under selective
    if (granularity == "selective")
      r.doc.set("/strategy/recompute_modules", modules->values, "--recompute-modules");
    else
      r.note(given(*modules) + ": ignored without --recompute-granularity selective (transformer_config.py:1943)");
  }
  if (granularity == "full" &&
      (a.text("--recompute-method", "") != "uniform" || a.integer("--recompute-num-layers", 0) != 1))
    r.note(fmt::format("--recompute-method {} --recompute-num-layers {}: priced as every layer recomputed (uniform, 1)",
                       a.text("--recompute-method", "none"), a.text("--recompute-num-layers", "none")));
}

void read_framework(Reading& r) {
  const MegatronArguments& a = r.a;
  r.doc.set("/framework/overlap_grad_reduce", a.has("--overlap-grad-reduce"), "--overlap-grad-reduce");
  r.doc.set("/framework/overlap_param_gather", a.has("--overlap-param-gather"), "--overlap-param-gather");
  r.doc.set("/framework/tp_comm_overlap", a.has("--tp-comm-overlap"), "--tp-comm-overlap");
  r.doc.set("/framework/gradient_accumulation_fusion", !a.has("--no-gradient-accumulation-fusion"),
            "--no-gradient-accumulation-fusion");
  r.doc.set("/framework/cross_entropy_loss_fusion", a.has("--cross-entropy-loss-fusion"),
            "--cross-entropy-loss-fusion");
  std::string cp_type = "p2p";
  if (const MegatronArgument* given_type = a.find("--cp-comm-type")) {
    for (const std::string& value : given_type->values)
      if (value != given_type->values.front() || (value != "p2p" && value != "allgather"))
        refuse(r.source, "--cp-comm-type",
               fmt::format("expected p2p or allgather for every layer (what twin models), got {}", value));
    cp_type = given_type->values.front() == "allgather" ? "all_gather" : "p2p";
  }
  r.doc.set("/framework/cp_comm_type", cp_type, "--cp-comm-type");
  if (a.has("--overlap-moe-expert-parallel-comm"))
    r.doc.set("/framework/overlap_moe_expert_parallel_comm", true, "--overlap-moe-expert-parallel-comm");
  if (a.has("--delay-wgrad-compute") && !a.has("--overlap-moe-expert-parallel-comm"))
    r.note("--delay-wgrad-compute without --overlap-moe-expert-parallel-comm: not modelled (twin delays the weight "
           "gradients only in the overlapped EP schedule)");
  else if (a.has("--delay-wgrad-compute"))
    r.doc.set("/framework/delay_wgrad_compute", true, "--delay-wgrad-compute");
}

// What the table does not hold, and the words around the arguments.
void note_the_rest(Reading& r, const MegatronCommandLine& command) {
  for (const std::string& assignment : command.environment) r.note(assignment + ": the environment, not modelled");
  if (!command.launcher.empty()) {
    std::string launcher;
    for (const std::string& word : command.launcher) launcher += (launcher.empty() ? "" : " ") + word;
    r.note(launcher + ": the launcher; the GPUs are the scenario's cluster");
  }
  for (const MegatronArgument& argument : command.arguments)
    if (!find_megatron_flag(argument.flag)) r.note(given(argument) + ": not modelled");
}

}  // namespace

MegatronScenario scenario_from_megatron_command_line(const Scenario& base, const MegatronCommandLine& command,
                                                     const std::string& source) {
  const MegatronArguments arguments(command.arguments);
  std::optional<std::string> connections;
  for (const std::string& assignment : command.environment)
    if (assignment.rfind("CUDA_DEVICE_MAX_CONNECTIONS=", 0) == 0)
      connections = assignment.substr(assignment.find('=') + 1);
  if (auto broken = megatron_rule_broken(arguments, base.cluster.total_gpus(), connections))
    throw InputError(source, "",
                     fmt::format("{} (launched on the scenario's {} GPUs)", *broken,
                                 base.cluster.total_gpus()));
  Reading r{arguments, base, source, {}, {}};
  read_model(r);
  read_model_variants(r);
  read_moe(r);
  read_training(r);
  read_strategy(r);
  read_framework(r);
  note_the_rest(r, command);
  json& doc = r.doc.root();
  const json resolved = to_json(base);
  doc["name"] = base.name;
  doc["cluster"] = resolved["cluster"];
  doc["profile"] = base.profile;
  doc["profile_scaling"] = base.profile_scaling;
  try {
    return {parse_scenario(doc, source), std::move(r.not_modelled)};
  } catch (const InputError& error) {
    const std::string flag = r.doc.flag_of(error.json_path());
    if (flag.empty()) throw;
    throw InputError(source, "", fmt::format("{}: {}", flag, error.expected()));
  }
}

MegatronScenario load_megatron_args(const Scenario& base, const std::filesystem::path& path) {
  const std::string text = read_input_file(path, "a Megatron-LM command line");
  return scenario_from_megatron_command_line(base, parse_megatron_command_line(text, path.string()), path.string());
}

}  // namespace twin
