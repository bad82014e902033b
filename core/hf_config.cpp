// Each family reads its own field names; a field twin needs and the file lacks is an error at that field's
// JSON path (the transformers library would fill a default, but a config.json that omits the model's size
// is not describing a trained model). Defaults are taken only where transformers' config class documents
// one that every checkpoint of the family relies on (num_key_value_heads, head_dim, tie_word_embeddings,
// biases, dropout, n_inner).
#include "core/hf_config.hpp"

#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/hf_config_families.hpp"
#include "core/hf_config_fields.hpp"
#include "core/model_limits.hpp"
#include "core/model_variants.hpp"

namespace twin {
namespace {

using namespace hf;

enum class Family { llama, mixtral, gpt2, gpt_neox, qwen3, qwen3_moe, qwen2_moe, deepseek, gpt_oss, gemma2, gemma3 };

struct Architecture {
  const char* name;        // config "architectures"[0]
  const char* model_type;  // config "model_type", when "architectures" is absent
  Family family;
};

const Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", Family::llama},
    {"MistralForCausalLM", "mistral", Family::llama},
    {"Qwen2ForCausalLM", "qwen2", Family::llama},
    {"Phi3ForCausalLM", "phi3", Family::llama},  // Phi-3's fused qkv_proj and gate_up_proj: Llama's weights
    {"MixtralForCausalLM", "mixtral", Family::mixtral},
    {"GPT2LMHeadModel", "gpt2", Family::gpt2},
    {"GPTNeoXForCausalLM", "gpt_neox", Family::gpt_neox},
    {"Qwen3ForCausalLM", "qwen3", Family::qwen3},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::qwen3_moe},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Family::qwen2_moe},
    {"DeepseekV2ForCausalLM", "deepseek_v2", Family::deepseek},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::deepseek},
    {"GptOssForCausalLM", "gpt_oss", Family::gpt_oss},
    {"Gemma2ForCausalLM", "gemma2", Family::gemma2},
    {"Gemma3ForCausalLM", "gemma3_text", Family::gemma3},
};

std::string architecture_names() {
  std::string names;
  for (const Architecture& a : kArchitectures) names += fmt::format("{}{}", names.empty() ? "" : ", ", a.name);
  return names;
}

Family family_of(const JsonReader& config) {
  if (auto architectures = config.find("architectures")) {
    const std::vector<JsonReader> names = architectures->non_empty_elements();
    const std::string name = names.front().string();
    for (const Architecture& a : kArchitectures)
      if (name == a.name) return a.family;
    names.front().fail_plain(fmt::format("architecture \"{}\" is not one twin maps; expected one of: {}", name,
                                         architecture_names()));
  }
  if (auto type = config.find("model_type")) {
    const std::string name = type->string();
    for (const Architecture& a : kArchitectures)
      if (name == a.model_type) return a.family;
    type->fail_plain(fmt::format("model_type \"{}\" is not one twin maps; expected the model_type of one of: {}", name,
                                 architecture_names()));
  }
  config.fail_plain("missing key 'architectures' (or 'model_type'): expected one of: " + architecture_names());
}

void llama_family(const JsonReader& config, ModelConfig& m, Family family) {
  llama_style_shape(config, m);
  const JsonReader act = config.required("hidden_act");
  if (act.string() != "silu") act.fail("expected \"silu\" (the gated MLP twin models for this family is SwiGLU)");
  m.activation = Activation::swiglu;
  m.normalization = config.find("layer_norm_eps") && !config.find("rms_norm_eps") ? Normalization::layernorm
                                                                                   : Normalization::rmsnorm;
  m.position_embedding_rope = true;
  m.rotary_base = rotary_base(config, "rope_theta");
  m.untie_embeddings_and_output_weights = !optional_bool(config, "tie_word_embeddings", false);
  m.add_bias_linear = optional_bool(config, "attention_bias", false) || optional_bool(config, "mlp_bias", false);
  m.hidden_dropout = 0;
  m.attention_dropout = dropout(config, "attention_dropout", 0);
  sliding_window(config, m, 0);  // Mistral's window on every layer; Qwen2's only when use_sliding_window
  if (family == Family::mixtral) {
    m.moe.num_experts = required_int(config, "num_local_experts", kMaxExperts);
    const JsonReader top_k = config.required("num_experts_per_tok");
    m.moe.top_k = static_cast<int>(top_k.integer(1, m.moe.num_experts));
    m.moe.ffn_hidden_size = m.ffn_hidden_size;
    m.moe.layer_freq = 1;
  }
}

void gpt2(const JsonReader& config, ModelConfig& m) {
  m.num_layers = required_int(config, "n_layer", kMaxLayers);
  m.hidden_size = config.required("n_embd").integer(1, kMaxHidden);
  m.num_attention_heads = required_int(config, "n_head", kMaxHeads);
  m.ffn_hidden_size = 4 * m.hidden_size;
  if (auto f = config.find("n_inner")) m.ffn_hidden_size = f->integer(1, kMaxFfn);
  attention_shape(config, m, "num_key_value_heads");  // GPT-2 is MHA: absent
  m.vocab_size = config.required("vocab_size").integer(1, kMaxVocab);
  m.max_position_embeddings = config.required("n_positions").integer(1, kMaxSequence);
  expect_gelu(config, "activation_function");
  m.activation = Activation::gelu;
  m.normalization = Normalization::layernorm;
  m.position_embedding_rope = false;
  m.untie_embeddings_and_output_weights = !optional_bool(config, "tie_word_embeddings", true);
  m.add_bias_linear = true;
  m.hidden_dropout = dropout(config, "resid_pdrop", 0.1);
  m.attention_dropout = dropout(config, "attn_pdrop", 0.1);
}

void gpt_neox(const JsonReader& config, ModelConfig& m) {
  llama_style_shape(config, m);
  expect_gelu(config, "hidden_act");
  m.activation = Activation::gelu;
  m.normalization = Normalization::layernorm;
  m.position_embedding_rope = true;
  m.rotary_base = rotary_base(config, "rotary_emb_base");
  m.untie_embeddings_and_output_weights = !optional_bool(config, "tie_word_embeddings", false);
  m.add_bias_linear = optional_bool(config, "attention_bias", true);
  m.hidden_dropout = dropout(config, "hidden_dropout", 0);
  m.attention_dropout = dropout(config, "attention_dropout", 0);
}

}  // namespace

ModelConfig model_from_hf_config(const nlohmann::json& document, const std::string& config_file) {
  const JsonReader config(document, config_file);
  config.expect_object();
  ModelConfig m;
  m.name = config_file;
  if (auto f = config.find("_name_or_path"); f && f->value().is_string() && !f->value().get<std::string>().empty())
    m.name = f->value().get<std::string>();
  const Family family = family_of(config);
  switch (family) {
    case Family::llama:
    case Family::mixtral: llama_family(config, m, family); break;
    case Family::gpt2: gpt2(config, m); break;
    case Family::gpt_neox: gpt_neox(config, m); break;
    case Family::qwen3: hf::qwen3(config, m); break;
    case Family::qwen3_moe: hf::qwen3_moe(config, m); break;
    case Family::qwen2_moe: hf::qwen2_moe(config, m); break;
    case Family::deepseek: hf::deepseek(config, m); break;
    case Family::gpt_oss: hf::gpt_oss(config, m); break;
    case Family::gemma2: hf::gemma2(config, m); break;
    case Family::gemma3: hf::gemma3(config, m); break;
  }
  check_model_variants(config, m);
  return m;
}

ModelConfig load_hf_config(const JsonReader& hf_config) {
  std::filesystem::path path = hf_config.string();
  if (path.is_relative()) path = std::filesystem::path(hf_config.file()).parent_path() / path;
  std::string text;
  try {
    text = read_input_file(path, "a Hugging Face config.json");
  } catch (const InputError& error) {  // named where the scenario points to it
    hf_config.fail_plain(fmt::format("expected a readable Hugging Face config.json: {}", error.what()));
  }
  return model_from_hf_config(parse_input_json(text, path.string()), path.string());
}

}  // namespace twin
