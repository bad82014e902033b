// Each variant key is read with its range; combinations twin does not model are refused by name.
#include "core/model_variants.hpp"

#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "core/model_limits.hpp"

namespace twin {
namespace {

MlaConfig parse_mla(const JsonReader& r, MlaConfig mla) {
  r.only_keys({"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"});
  if (auto f = r.find("q_lora_rank")) mla.q_lora_rank = f->integer(0, kMaxHidden);
  if (auto f = preset_field(r, "kv_lora_rank", mla.enabled())) mla.kv_lora_rank = f->integer(1, kMaxHidden);
  if (auto f = preset_field(r, "qk_head_dim", mla.qk_head_dim > 0)) mla.qk_head_dim = f->integer(1, kMaxKvChannels);
  if (auto f = r.find("qk_pos_emb_head_dim")) mla.qk_pos_emb_head_dim = f->integer(0, kMaxKvChannels);
  if (auto f = preset_field(r, "v_head_dim", mla.v_head_dim > 0)) mla.v_head_dim = f->integer(1, kMaxKvChannels);
  return mla;
}

double softcap(const JsonReader& f) {
  return f.number(0, 1e6, "expected a soft-capping value >= 0 (0: none)");
}

// Megatron's rules on the router (TransformerConfig.__post_init__: an expert bias only with sigmoid scores, pre-softmax
// only with softmax ones, groups dividing the experts and at most as many chosen as there are) and twin's (every
// chosen group adds at least one expert's value to its score, the chosen groups hold top_k experts), each refusal at
// at(key): the key where it was given.
template <class At>
void check_router(const MoeConfig& moe, At&& at) {
  const bool sigmoid = moe.router_score_function == RouterScore::sigmoid;
  if (moe.router_expert_bias && !sigmoid)
    at("router_expert_bias")
        .fail_plain("expected router_score_function sigmoid with router_expert_bias (Megatron: expert bias for "
                    "aux-loss-free routing only supports the sigmoid score function)");
  if (moe.router_pre_softmax && sigmoid)
    at("router_pre_softmax")
        .fail_plain("expected router_score_function softmax with router_pre_softmax (a softmax before the top-k)");
  if (moe.router_group_topk == 0) return;
  const int groups = moe.router_num_groups;
  const JsonReader where = at("router_group_topk");
  if (groups == 0) where.fail_plain("expected router_num_groups beside router_group_topk (Megatron's rule)");
  if (moe.num_experts % groups != 0 || moe.router_group_topk > groups)
    where.fail_plain(fmt::format("expected router_num_groups {} to divide num_experts {} and router_group_topk {} at "
                                 "most it (Megatron's rule)",
                                 groups, moe.num_experts, moe.router_group_topk));
  if (moe.router_group_topk > moe.top_k || moe.router_group_topk * (moe.num_experts / groups) < moe.top_k)
    where.fail_plain(fmt::format("expected router_group_topk {} at most top_k {}, its groups holding at least top_k "
                                 "experts ({} each)",
                                 moe.router_group_topk, moe.top_k, moe.num_experts / groups));
}

// The router's keys (core/model.hpp MoeConfig), checked together.
void parse_router(const JsonReader& r, MoeConfig& moe) {
  if (auto f = r.find("router_score_function"))
    moe.router_score_function = *router_score_from_string(f->one_of({"softmax", "sigmoid"}, "router score function"));
  if (auto f = r.find("router_pre_softmax")) moe.router_pre_softmax = f->boolean();
  if (auto f = r.find("router_topk_scaling_factor"))
    moe.router_topk_scaling_factor = f->number(1e-3, 1e3, "expected a scaling factor in [0.001, 1000]");
  if (auto f = r.find("router_expert_bias")) moe.router_expert_bias = f->boolean();
  if (auto f = r.find("router_bias_update_rate"))
    moe.router_bias_update_rate = f->number(1e-9, 1, "expected a bias update rate in [1e-9, 1]");
  if (auto f = r.find("router_num_groups")) moe.router_num_groups = static_cast<int>(f->integer(0, kMaxExperts));
  if (auto f = r.find("router_group_topk")) moe.router_group_topk = static_cast<int>(f->integer(0, kMaxExperts));
  if (auto f = r.find("aux_loss_coeff")) moe.aux_loss_coeff = f->number(0, 1, "expected a loss weight in [0, 1]");
  // Checked on what the keys, a preset and a Hugging Face config left together, at the key that was given.
  check_router(moe, [&r](std::string_view key) {
    return r.find(key).value_or(r.find("router_score_function").value_or(r));
  });
}

}  // namespace

void parse_model_variants(const JsonReader& r, ModelConfig& m) {
  if (auto f = r.find("qk_layernorm")) m.qk_layernorm = f->boolean();
  if (auto f = r.find("window_size")) m.window_size = f->integer(0, kMaxSequence);
  if (auto f = r.find("window_attn_skip_freq")) m.window_attn_skip_freq = static_cast<int>(f->integer(0, kMaxLayers));
  if (auto f = r.find("attention_sinks")) m.attention_sinks = f->boolean();
  if (auto f = r.find("attention_softcap")) m.attention_softcap = softcap(*f);
  if (auto f = r.find("final_logit_softcap")) m.final_logit_softcap = softcap(*f);
  if (auto f = r.find("post_norms")) m.post_norms = f->boolean();
  if (auto f = r.find("mtp_num_layers")) m.mtp_num_layers = static_cast<int>(f->integer(0, kMaxLayers));
  if (auto f = r.find("glu_linear_offset")) m.glu_linear_offset = f->number(-1e3, 1e3, "expected an offset in [-1000, 1000]");
  if (auto f = r.find("activation_func_clamp_value"))
    m.activation_func_clamp_value = f->number(0, 1e6, "expected a clamp value in [0, 1e6] (0: none)");
  // Megatron reads both in the quick GeGLU alone (its --activation-func-clamp-value help: "Only used when
  // activation_func is quick_gelu"): given with another activation they would be a model nothing runs.
  for (const char* key : {"glu_linear_offset", "activation_func_clamp_value"})
    if (auto f = r.find(key); f && f->value() != 0.0 && m.activation != Activation::quick_geglu)
      f->fail_plain(fmt::format("expected 0 or no {} beside activation {} (it applies to quick_geglu only)", key,
                                to_string(m.activation)));
  auto mla = r.value().find("mla");
  if (mla != r.value().end() && mla->is_null()) m.mla = MlaConfig{};  // "mla": null: back to QKV attention
  else if (auto f = r.find("mla")) m.mla = parse_mla(*f, m.mla);
}

void parse_moe_variants(const JsonReader& r, MoeConfig& moe) {
  if (auto f = r.find("first_dense_layers")) moe.first_dense_layers = static_cast<int>(f->integer(0, kMaxLayers));
  if (auto f = r.find("shared_expert_ffn_hidden_size")) moe.shared_expert_ffn_hidden_size = f->integer(0, kMaxFfn);
  if (auto f = r.find("expert_capacity_factor"))
    moe.expert_capacity_factor = f->number(0.01, kMaxExperts, "expected a capacity factor in [0.01, 1024]");
  if (auto f = r.find("pad_expert_input_to_capacity")) {
    moe.pad_expert_input_to_capacity = f->boolean();
    if (moe.pad_expert_input_to_capacity && !moe.expert_capacity_factor)
      f->fail("expert_capacity_factor beside it (Megatron's rule: the capacity it pads to)");
  }
  parse_router(r, moe);
}

void check_model_variants(const JsonReader& where, const ModelConfig& m) {
  if (m.mla.enabled()) {
    if (m.qk_layernorm)
      where.fail_plain("expected no qk_layernorm with mla (MLA normalises its latents; QK-norm on it is not modelled)");
    if (m.add_bias_linear)
      where.fail_plain("expected add_bias_linear false with mla (MLA's projections with biases are not modelled)");
    if (!m.position_embedding_rope)
      where.fail_plain("expected position_embedding_rope with mla (its qk_pos_emb_head_dim part is RoPE's)");
  }
  if (m.window_attn_skip_freq > 0 && m.window_size == 0)
    where.fail_plain("expected window_size > 0 with window_attn_skip_freq (which layers attend fully among windowed ones)");
  if (m.is_moe()) check_router(m.moe, [&where](std::string_view) { return where; });
  if (m.is_moe() && m.moe.first_dense_layers >= m.num_layers)
    where.fail_plain(fmt::format("expected moe.first_dense_layers below num_layers {}, got {} (no MoE layer left)",
                                 m.num_layers, m.moe.first_dense_layers));
}

}  // namespace twin
