// The model section of a scenario from a Megatron-LM command line: widths, heads, norm, activation, positions,
// biases, the architecture variants of 2025-26, the experts and their router, each with Megatron's default for an
// absent flag at kMegatronCommit (core/megatron_flags.cpp).
#include <algorithm>

#include "core/megatron_reading.hpp"
#include "core/moe_layer_pattern.hpp"

namespace twin::megatron_reading {
namespace {

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

}  // namespace

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

// --moe-layer-freq: an integer, or a list of 0 and 1 per layer (dense first layers and a frequency).
void read_moe_layers(Reading& r) {
  const MegatronArguments& a = r.a;
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
}

// The routing's distribution: forced balance, loss-free bias, or the base model's measured skew otherwise.
void read_routing(Reading& r) {
  const MegatronArguments& a = r.a;
  if (a.has("--moe-router-force-load-balancing"))
    r.doc.set("/model/moe/routing", nlohmann::json{{"distribution", "forced"}}, "--moe-router-force-load-balancing");
  else if (a.has("--moe-router-enable-expert-bias"))
    r.doc.set("/model/moe/routing", nlohmann::json{{"distribution", "loss_free"}}, "--moe-router-enable-expert-bias");
  else if (r.base.model.moe.routing_imbalance)
    r.doc.set("/model/moe/routing_imbalance", *r.base.model.moe.routing_imbalance, "--num-experts");
  else if (r.base.model.moe.routing)
    r.doc.set("/model/moe/routing", routing_json(*r.base.model.moe.routing), "--num-experts");
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
  read_moe_layers(r);
  if (a.has("--moe-shared-expert-intermediate-size"))
    r.doc.set("/model/moe/shared_expert_ffn_hidden_size", a.integer("--moe-shared-expert-intermediate-size", 0),
              "--moe-shared-expert-intermediate-size");
  const std::string dispatcher = a.text("--moe-token-dispatcher-type", "allgather");
  r.doc.set("/framework/moe_token_dispatcher_type", dispatcher, "--moe-token-dispatcher-type");
  // A negative factor is Megatron's way to say dropless (TransformerConfig.__post_init__).
  if (a.has("--moe-expert-capacity-factor") && a.real("--moe-expert-capacity-factor", -1.0) >= 0)
    r.doc.set("/model/moe/expert_capacity_factor", a.real("--moe-expert-capacity-factor", 1.0),
              "--moe-expert-capacity-factor");
  if (a.has("--moe-pad-expert-input-to-capacity"))
    r.doc.set("/model/moe/pad_expert_input_to_capacity", true, "--moe-pad-expert-input-to-capacity");
  read_routing(r);
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

}  // namespace twin::megatron_reading
