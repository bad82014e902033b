// The scenario's `model` section (DESIGN.md "Scenario (JSON)"): presets and Hugging Face configs fill absent fields,
// explicit fields win, every count bounded so that derived counts stay inside 64-bit integers.
#include "core/scenario_model.hpp"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/hf_config.hpp"
#include "core/model_limits.hpp"
#include "core/model_variants.hpp"
#include "core/moe_routing.hpp"

namespace twin {

namespace {

using Reader = JsonReader;

MoeConfig parse_moe(const Reader& r, MoeConfig moe, std::int64_t dense_ffn) {
  r.only_keys({"num_experts", "top_k", "ffn_hidden_size", "layer_freq", "routing_imbalance", "routing", "first_dense_layers",
               "shared_expert_ffn_hidden_size", "expert_capacity_factor", "pad_expert_input_to_capacity",
               "router_score_function", "router_pre_softmax", "router_topk_scaling_factor", "router_expert_bias",
               "router_bias_update_rate", "router_num_groups", "router_group_topk", "aux_loss_coeff"});
  const bool has_base = moe.num_experts > 0;
  if (!has_base) moe.ffn_hidden_size = dense_ffn;
  if (auto f = preset_field(r, "num_experts", has_base)) moe.num_experts = static_cast<int>(f->integer(1, kMaxExperts));
  if (auto f = preset_field(r, "top_k", has_base)) moe.top_k = static_cast<int>(f->integer(1, kMaxExperts));
  if (auto f = r.find("ffn_hidden_size")) moe.ffn_hidden_size = f->integer(1, kMaxFfn);
  if (auto f = r.find("layer_freq")) moe.layer_freq = static_cast<int>(f->integer(1, kMaxLayers));
  if (auto f = r.find("routing_imbalance"))
    moe.routing_imbalance = f->number(1.0, 1e6, "expected a number >= 1 (busiest expert load over the mean)");
  if (auto f = r.find("routing")) {
    if (r.find("routing_imbalance")) f->fail_plain("expected either routing or routing_imbalance, not both");
    moe.routing = parse_routing(*f, moe.num_experts, std::filesystem::path(r.file()).parent_path());
    moe.routing_imbalance.reset();  // a preset's constant gives way to the distribution
  } else if (r.find("routing_imbalance")) {
    moe.routing.reset();
  }
  parse_moe_variants(r, moe);
  if (moe.top_k > moe.num_experts)
    (r.find("top_k") ? *r.find("top_k") : r)
        .fail_plain(fmt::format("expected top_k <= num_experts {}, got {}", moe.num_experts, moe.top_k));
  return moe;
}

// The model a preset or a Hugging Face config describes (`has_preset` set), or an empty custom one.
ModelConfig base_model(const Reader& r, bool& has_preset) {
  ModelConfig m;
  m.name = "custom";
  if (auto p = r.find("hf_config")) {  // a Hugging Face config.json fills the fields, as a preset does
    if (r.find("preset")) p->fail_plain("expected either \"preset\" or \"hf_config\", not both");
    m = load_hf_config(*p);
    has_preset = true;
  } else if (auto p = r.find("preset")) {
    if (!p->value().is_string()) p->fail("expected a model preset name");
    auto preset = model_preset(p->value().get<std::string>());
    if (!preset) {
      std::string message = fmt::format("unknown model preset {}", p->describe_value());
      if (auto near = closest_name(p->value().get<std::string>(), model_preset_names()))
        message += fmt::format(" (did you mean '{}'?)", *near);
      p->fail_plain(message + "; expected one of: " + join_names(model_preset_names()));
    }
    m = *preset;
    has_preset = true;
  }
  return m;
}

// The sizes: layers, widths, heads and their groups and channels, vocabulary and positions. A preset's MHA follows its
// heads; a stated size overrides the preset's.
void parse_sizes(const Reader& r, bool has_preset, ModelConfig& m) {
  const bool preset_is_mha = m.num_query_groups == m.num_attention_heads;
  if (auto f = preset_field(r, "num_layers", has_preset)) m.num_layers = static_cast<int>(f->integer(1, kMaxLayers));
  if (auto f = preset_field(r, "hidden_size", has_preset)) m.hidden_size = f->integer(1, kMaxHidden);
  if (auto f = preset_field(r, "ffn_hidden_size", has_preset)) m.ffn_hidden_size = f->integer(1, kMaxFfn);
  if (auto f = preset_field(r, "num_attention_heads", has_preset))
    m.num_attention_heads = static_cast<int>(f->integer(1, kMaxHeads));
  if (auto f = preset_field(r, "vocab_size", has_preset)) m.vocab_size = f->integer(1, kMaxVocab);

  if (auto f = r.find("num_query_groups")) {
    m.num_query_groups = static_cast<int>(f->integer(1, kMaxHeads));
    if (m.num_attention_heads % m.num_query_groups != 0)
      f->fail(fmt::format("expected a divisor of num_attention_heads {}", m.num_attention_heads));
  } else if (!has_preset || preset_is_mha || m.num_attention_heads % m.num_query_groups != 0) {
    m.num_query_groups = m.num_attention_heads;  // MHA unless told otherwise
  }
  if (auto f = r.find("kv_channels")) {
    m.kv_channels = f->integer(1, kMaxKvChannels);
  } else if (!has_preset || r.find("hidden_size") || r.find("num_attention_heads")) {  // else the base's head_dim
    if (m.hidden_size % m.num_attention_heads != 0)
      r.fail_plain(fmt::format("expected kv_channels, since hidden_size {} is not divisible by num_attention_heads {}",
                               m.hidden_size, m.num_attention_heads));
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  if (auto f = r.find("max_position_embeddings")) m.max_position_embeddings = f->integer(1, kMaxSequence);
  else if (!has_preset) m.max_position_embeddings = 0;  // filled from training.seq_length
}

// The kinds of its parts: activation, norm, attention backend, embeddings, positions, biases, dropout.
void parse_kinds(const Reader& r, ModelConfig& m) {
  if (auto f = r.find("activation"))
    m.activation = *activation_from_string(f->one_of({"swiglu", "gelu", "squared_relu", "geglu", "quick_geglu"}, "activation"));
  if (auto f = r.find("normalization"))
    m.normalization = *normalization_from_string(f->one_of({"rmsnorm", "layernorm"}, "normalization"));
  if (auto f = r.find("attention_backend"))
    m.attention_backend = *attention_backend_from_string(f->one_of({"flash", "fused", "unfused"}, "attention backend"));
  if (auto f = r.find("untie_embeddings_and_output_weights")) m.untie_embeddings_and_output_weights = f->boolean();
  if (auto f = r.find("position_embedding_rope")) m.position_embedding_rope = f->boolean();
  if (auto f = r.find("rotary_base")) m.rotary_base = f->integer(1, kMaxRotaryBase);
  if (auto f = r.find("add_bias_linear")) m.add_bias_linear = f->boolean();
  const char* dropout = "expected a dropout probability in [0, 1)";
  if (auto f = r.find("hidden_dropout")) m.hidden_dropout = f->number(0, std::nextafter(1.0, 0.0), dropout);
  if (auto f = r.find("attention_dropout")) m.attention_dropout = f->number(0, std::nextafter(1.0, 0.0), dropout);
}

}  // namespace

ModelConfig parse_model(const Reader& r) {
  r.only_keys({"preset", "hf_config", "name", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
               "num_query_groups", "kv_channels", "vocab_size", "max_position_embeddings", "activation",
               "normalization", "attention_backend", "untie_embeddings_and_output_weights",
               "position_embedding_rope", "rotary_base", "add_bias_linear", "hidden_dropout", "attention_dropout",
               "moe", "qk_layernorm", "window_size", "window_attn_skip_freq", "attention_sinks", "attention_softcap",
               "final_logit_softcap", "post_norms", "mla", "mtp_num_layers", "glu_linear_offset",
               "activation_func_clamp_value"});
  bool has_preset = false;
  ModelConfig m = base_model(r, has_preset);
  if (auto f = r.find("name")) m.name = f->string();
  parse_sizes(r, has_preset, m);
  parse_kinds(r, m);
  auto moe = r.value().find("moe");
  if (moe != r.value().end() && moe->is_null()) m.moe = MoeConfig{};  // "moe": null makes a MoE preset dense
  else if (auto f = r.find("moe")) m.moe = parse_moe(*f, m.moe, m.ffn_hidden_size);
  parse_model_variants(r, m);
  check_model_variants(r, m);
  return m;
}

}  // namespace twin
