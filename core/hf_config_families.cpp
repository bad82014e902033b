// Each family reads its own field names and refuses by name what twin does not model. Fields that change no
// time and no memory (RoPE scaling, the router's scoring function and grouping, quantization of the published
// checkpoint, Gemma-2's query_pre_attn_scalar) are not read.
#include "core/hf_config_families.hpp"

#include <fmt/format.h>

#include "core/hf_config_fields.hpp"
#include "core/model_limits.hpp"

namespace twin::hf {
namespace {

void expect_silu(const JsonReader& config) {
  const JsonReader act = config.required("hidden_act");
  if (act.string() != "silu") act.fail("expected \"silu\" (the gated MLP twin models for this family is SwiGLU)");
}

// What Llama-style families of 2025 share: SwiGLU, RMSNorm, RoPE, untied embeddings unless told.
void decoder_basics(const JsonReader& config, ModelConfig& m) {
  llama_style_shape(config, m);
  m.activation = Activation::swiglu;
  m.normalization = Normalization::rmsnorm;
  m.position_embedding_rope = true;
  m.rotary_base = rotary_base(config, "rope_theta");
  m.untie_embeddings_and_output_weights = !optional_bool(config, "tie_word_embeddings", false);
  m.attention_dropout = dropout(config, "attention_dropout", 0);
}

void experts(const JsonReader& config, ModelConfig& m, std::string_view count_key, std::string_view ffn_key) {
  m.moe.num_experts = required_int(config, count_key, kMaxExperts);
  m.moe.top_k = static_cast<int>(config.required("num_experts_per_tok").integer(1, m.moe.num_experts));
  m.moe.ffn_hidden_size = config.required(ffn_key).integer(1, kMaxFfn);
  m.moe.layer_freq = 1;
}

// Qwen's MoE layers (Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock): the experts on every layer.
void qwen_experts(const JsonReader& config, ModelConfig& m) {
  experts(config, m, "num_experts", "moe_intermediate_size");
  refuse_field(config, "decoder_sparse_step", 1,
               "MoE on every decoder_sparse_step-th layer counted from 1 is not Megatron's moe_layer_freq");
  if (auto dense = config.find("mlp_only_layers"); dense && !dense->elements().empty())
    dense->fail_plain("mlp_only_layers is not modelled: dense layers among MoE layers at chosen indices");
  // norm_topk_prob false (Qwen1.5/2-MoE): the softmax over every expert, the chosen ones' probabilities unrenormalised.
  m.moe.router_pre_softmax = !optional_bool(config, "norm_topk_prob", false);
}

// DeepSeek's gate (DeepseekV3TopkRouter / DeepseekV2MoEGate): softmax or sigmoid scores, normalised over the chosen
// or not, times routed_scaling_factor; topk_method noaux_tc is V3's expert bias (e_score_correction_bias); the group
// limit (n_group, topk_group) of the group-limited methods. check_model_variants holds the result to Megatron's rules.
void deepseek_router(const JsonReader& config, ModelConfig& m) {
  MoeConfig& moe = m.moe;
  if (auto f = config.find("scoring_func"))
    moe.router_score_function = *router_score_from_string(f->one_of({"softmax", "sigmoid"}, "DeepSeek scoring_func"));
  const bool sigmoid = moe.router_score_function == RouterScore::sigmoid;
  // Absent: the config classes' defaults, V3's (sigmoid) true and V2's (softmax) false.
  const bool normalised = optional_bool(config, "norm_topk_prob", sigmoid);
  if (sigmoid && !normalised && moe.top_k > 1)
    config.required("norm_topk_prob").fail_plain("sigmoid scores not normalised over the chosen experts are not "
                                                 "Megatron's router (it normalises them when top_k > 1)");
  moe.router_pre_softmax = !sigmoid && !normalised;
  if (auto f = config.find("routed_scaling_factor"))
    moe.router_topk_scaling_factor = f->number(1e-3, 1e3, "expected a scaling factor in [0.001, 1000]");
  std::string method = "greedy";
  if (auto f = config.find("topk_method")) {
    method = f->one_of({"greedy", "group_limited_greedy", "noaux_tc"}, "DeepSeek topk_method");
    moe.router_expert_bias = method == "noaux_tc";
    if (moe.router_expert_bias && !sigmoid)
      f->fail_plain("noaux_tc's expert bias with softmax scores is not Megatron's router (sigmoid only)");
  }
  // The group limit of group_limited_greedy (V2) and noaux_tc (V3), as Megatron's --moe-router-num-groups and
  // --moe-router-group-topk run it (a group's score: the sum of its top top_k / topk_group values; V2's gate takes
  // the group's largest score).
  const auto group_field = [&](std::string_view key) {
    return static_cast<int>(config.required(key).integer(1, moe.num_experts));
  };
  if (method != "greedy" && group_field("n_group") > 1) {
    moe.router_num_groups = group_field("n_group");
    moe.router_group_topk = group_field("topk_group");
  }
}

}  // namespace

void qwen3(const JsonReader& config, ModelConfig& m) {
  decoder_basics(config, m);
  expect_silu(config);
  refuse_field(config, "attention_bias", false, "Qwen3's QKV and projection biases are not modelled");
  m.qk_layernorm = true;  // Qwen3Attention's q_norm and k_norm, over head_dim
  sliding_window(config, m, 0);
}

void qwen3_moe(const JsonReader& config, ModelConfig& m) {
  qwen3(config, m);
  qwen_experts(config, m);
}

void qwen2_moe(const JsonReader& config, ModelConfig& m) {
  decoder_basics(config, m);
  expect_silu(config);
  qwen_experts(config, m);
  m.moe.shared_expert_ffn_hidden_size = config.required("shared_expert_intermediate_size").integer(0, kMaxFfn);
  sliding_window(config, m, 0);
}

void deepseek(const JsonReader& config, ModelConfig& m) {
  refuse_field(config, "attention_bias", false, "MLA with biases is not modelled");
  decoder_basics(config, m);
  // The MTP depths the checkpoint holds (model.layers.61 for DeepSeek-V3), Megatron's --mtp-num-layers.
  if (auto f = config.find("num_nextn_predict_layers"); f && !f->value().is_null())
    m.mtp_num_layers = static_cast<int>(f->integer(0, kMaxLayers));
  expect_silu(config);
  MlaConfig& a = m.mla;
  if (auto f = config.find("q_lora_rank"); f && !f->value().is_null()) a.q_lora_rank = f->integer(1, kMaxHidden);
  a.kv_lora_rank = config.required("kv_lora_rank").integer(1, kMaxHidden);
  a.qk_head_dim = config.required("qk_nope_head_dim").integer(1, kMaxKvChannels);
  a.qk_pos_emb_head_dim = config.required("qk_rope_head_dim").integer(0, kMaxKvChannels);
  a.v_head_dim = config.required("v_head_dim").integer(1, kMaxKvChannels);
  m.kv_channels = a.qk_head_dim + a.qk_pos_emb_head_dim;  // a head's query and key
  m.num_query_groups = m.num_attention_heads;             // MLA: every head its own key and value
  experts(config, m, "n_routed_experts", "moe_intermediate_size");
  if (auto f = config.find("moe_layer_freq")) m.moe.layer_freq = static_cast<int>(f->integer(1, kMaxLayers));
  if (auto f = config.find("first_k_dense_replace")) m.moe.first_dense_layers = static_cast<int>(f->integer(0, kMaxLayers));
  if (auto f = config.find("n_shared_experts"); f && !f->value().is_null())
    m.moe.shared_expert_ffn_hidden_size = f->integer(0, kMaxExperts) * m.moe.ffn_hidden_size;
  deepseek_router(config, m);
}

void gpt_oss(const JsonReader& config, ModelConfig& m) {
  decoder_basics(config, m);
  // GptOssExperts' GLU: gate.clamp(max=limit) * sigmoid(1.702 gate) * (up.clamp(-limit, limit) + 1) (transformers'
  // modeling_gpt_oss.py, alpha 1.702, swiglu_limit 7.0): Megatron's quick GeGLU with offset 1 and that clamp. The
  // config's hidden_act says silu for it.
  expect_silu(config);
  m.activation = Activation::quick_geglu;
  m.glu_linear_offset = 1;
  m.activation_func_clamp_value = 7;
  if (auto f = config.find("swiglu_limit"); f && !f->value().is_null())
    m.activation_func_clamp_value = f->number(0, 1e6, "expected a clamp in [0, 1e6]");
  experts(config, m, "num_local_experts", "intermediate_size");
  // GptOssAttention's q, k, v and o biases and GptOssExperts' biases (always there) are add_bias_linear's.
  m.add_bias_linear = true;
  refuse_field(config, "attention_bias", true, "gpt-oss without attention biases (its experts always have them)");
  m.attention_sinks = true;  // GptOssAttention.sinks, one per head
  sliding_window(config, m, 2);  // transformers' default layer_types: sliding on odd layer numbers
}

namespace {

// What Gemma-2 and Gemma-3 share: gated GeLU, four norms a layer, tied embeddings, no biases.
void gemma_layers(const JsonReader& config, ModelConfig& m, std::string_view name) {
  decoder_basics(config, m);
  m.untie_embeddings_and_output_weights = !optional_bool(config, "tie_word_embeddings", true);
  const std::string_view key = config.find("hidden_activation") ? "hidden_activation" : "hidden_act";
  expect_gelu(config, key);
  m.activation = Activation::geglu;  // GemmaMLP: gate_proj, up_proj, down_proj with GeLU on the gate
  m.post_norms = true;               // post_attention_layernorm and post_feedforward_layernorm
  refuse_field(config, "attention_bias", false, fmt::format("{} with attention biases", name));
  if (auto f = config.find("attn_logit_softcapping"); f && !f->value().is_null())
    m.attention_softcap = f->number(0, 1e6, "expected a soft-capping value >= 0");
  if (auto f = config.find("final_logit_softcapping"); f && !f->value().is_null())
    m.final_logit_softcap = f->number(0, 1e6, "expected a soft-capping value >= 0");
}

}  // namespace

void gemma2(const JsonReader& config, ModelConfig& m) {
  gemma_layers(config, m, "Gemma-2");
  sliding_window(config, m, 2);  // Gemma2DecoderLayer: sliding on even layer indices, full on odd
}

void gemma3(const JsonReader& config, ModelConfig& m) {
  gemma_layers(config, m, "Gemma-3");
  m.qk_layernorm = true;  // Gemma3Attention's q_norm and k_norm over head_dim, in place of soft-capping
  // Gemma3TextConfig: every sliding_window_pattern-th layer full (6: five local layers to one global), unless
  // layer_types lists them.
  int pattern = 6;
  if (auto f = config.find("sliding_window_pattern")) pattern = static_cast<int>(f->integer(1, kMaxLayers));
  sliding_window(config, m, pattern);
}

}  // namespace twin::hf
