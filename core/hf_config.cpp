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
#include "core/model_limits.hpp"

namespace twin {
namespace {

enum class Family { llama, mixtral, gpt2, gpt_neox };

struct Architecture {
  const char* name;        // config "architectures"[0]
  const char* model_type;  // config "model_type", when "architectures" is absent
  Family family;
};

const Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", Family::llama},       {"MistralForCausalLM", "mistral", Family::llama},
    {"Qwen2ForCausalLM", "qwen2", Family::llama},       {"MixtralForCausalLM", "mixtral", Family::mixtral},
    {"GPT2LMHeadModel", "gpt2", Family::gpt2},          {"GPTNeoXForCausalLM", "gpt_neox", Family::gpt_neox},
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

int required_int(const JsonReader& config, std::string_view key, std::int64_t max) {
  return static_cast<int>(config.required(key).integer(1, max));
}

double dropout(const JsonReader& config, std::string_view key, double absent) {
  if (auto f = config.find(key)) return f->number(0, std::nextafter(1.0, 0.0), "expected a dropout probability in [0, 1)");
  return absent;
}

// RoPE's base: a float in config.json (500000.0), an integer to Megatron's --rotary-base; absent, the 10000 of
// RoPE's paper (Su et al. 2021), Hugging Face's and Megatron's default.
std::int64_t rotary_base(const JsonReader& config, std::string_view key) {
  if (auto f = config.find(key))
    return std::llround(f->number(1, static_cast<double>(kMaxRotaryBase), "expected RoPE's base, a number >= 1"));
  return 10000;
}

bool optional_bool(const JsonReader& config, std::string_view key, bool absent) {
  if (auto f = config.find(key)) return f->boolean();
  return absent;
}

// GPT-2 and GPT-NeoX spell GeLU several ways (gelu, gelu_new, gelu_fast, gelu_pytorch_tanh): all one cost.
void expect_gelu(const JsonReader& config, std::string_view key) {
  if (auto f = config.find(key)) {
    const std::string act = f->string();
    if (act.rfind("gelu", 0) != 0) f->fail("expected a GeLU activation (\"gelu\", \"gelu_new\", ...)");
  }
}

// Query groups and head width, checked against the heads.
void attention_shape(const JsonReader& config, ModelConfig& m, std::string_view kv_heads_key) {
  m.num_query_groups = m.num_attention_heads;
  if (auto f = config.find(kv_heads_key)) {
    m.num_query_groups = static_cast<int>(f->integer(1, kMaxHeads));
    if (m.num_attention_heads % m.num_query_groups != 0)
      f->fail(fmt::format("expected a divisor of num_attention_heads {}", m.num_attention_heads));
  }
  if (auto f = config.find("head_dim")) {
    m.kv_channels = f->integer(1, kMaxKvChannels);
  } else {
    if (m.hidden_size % m.num_attention_heads != 0)
      config.fail_plain(fmt::format("expected head_dim, since hidden_size {} is not divisible by num_attention_heads {}",
                                    m.hidden_size, m.num_attention_heads));
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
}

// The shape fields Llama-style configs and GPT-NeoX name alike.
void llama_style_shape(const JsonReader& config, ModelConfig& m) {
  m.num_layers = required_int(config, "num_hidden_layers", kMaxLayers);
  m.hidden_size = config.required("hidden_size").integer(1, kMaxHidden);
  m.ffn_hidden_size = config.required("intermediate_size").integer(1, kMaxFfn);
  m.num_attention_heads = required_int(config, "num_attention_heads", kMaxHeads);
  attention_shape(config, m, "num_key_value_heads");
  m.vocab_size = config.required("vocab_size").integer(1, kMaxVocab);
  m.max_position_embeddings = config.required("max_position_embeddings").integer(1, kMaxSequence);
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
  }
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
