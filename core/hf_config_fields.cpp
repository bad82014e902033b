// Field readers shared by the Hugging Face config families.
#include "core/hf_config_fields.hpp"

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/model_limits.hpp"

namespace twin::hf {

int required_int(const JsonReader& config, std::string_view key, std::int64_t max) {
  return static_cast<int>(config.required(key).integer(1, max));
}

double dropout(const JsonReader& config, std::string_view key, double absent) {
  if (auto f = config.find(key)) return f->number(0, std::nextafter(1.0, 0.0), "expected a dropout probability in [0, 1)");
  return absent;
}


std::int64_t rotary_base(const JsonReader& config, std::string_view key) {
  if (auto f = config.find(key))
    return std::llround(f->number(1, static_cast<double>(kMaxRotaryBase), "expected RoPE's base, a number >= 1"));
  return 10000;
}

bool optional_bool(const JsonReader& config, std::string_view key, bool absent) {
  if (auto f = config.find(key)) return f->boolean();
  return absent;
}

void expect_gelu(const JsonReader& config, std::string_view key) {
  if (auto f = config.find(key)) {
    const std::string act = f->string();
    if (act.rfind("gelu", 0) != 0) f->fail("expected a GeLU activation (\"gelu\", \"gelu_new\", ...)");
  }
}

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

void llama_style_shape(const JsonReader& config, ModelConfig& m) {
  m.num_layers = required_int(config, "num_hidden_layers", kMaxLayers);
  m.hidden_size = config.required("hidden_size").integer(1, kMaxHidden);
  m.ffn_hidden_size = config.required("intermediate_size").integer(1, kMaxFfn);
  m.num_attention_heads = required_int(config, "num_attention_heads", kMaxHeads);
  attention_shape(config, m, "num_key_value_heads");
  m.vocab_size = config.required("vocab_size").integer(1, kMaxVocab);
  m.max_position_embeddings = config.required("max_position_embeddings").integer(1, kMaxSequence);
}

namespace {

// The window_attn_skip_freq a layer_types list states, or the first entry that breaks it.
int skip_freq_of(const JsonReader& layer_types, int num_layers) {
  const std::vector<JsonReader> types = layer_types.non_empty_elements();
  if (static_cast<int>(types.size()) != num_layers)
    layer_types.fail(fmt::format("expected one entry per layer ({}), got {}", num_layers, types.size()));
  int first_full = 0;  // 1-based: the first full layer's number, the period of the pattern
  for (int i = 0; i < num_layers && first_full == 0; ++i)
    if (types[i].one_of({"sliding_attention", "full_attention"}, "layer type") == "full_attention") first_full = i + 1;
  for (int i = 0; i < num_layers; ++i) {
    const bool full = types[i].one_of({"sliding_attention", "full_attention"}, "layer type") == "full_attention";
    if (full != (first_full > 0 && (i + 1) % first_full == 0))
      types[i].fail_plain(fmt::format("layer types that are not every layer windowed with every {}-th full are not "
                                      "modelled (Megatron's window_attn_skip_freq states only such patterns)",
                                      first_full));
  }
  return first_full;
}

}  // namespace

void sliding_window(const JsonReader& config, ModelConfig& m, int absent_pattern_freq) {
  if (auto use = config.find("use_sliding_window")) {
    if (!use->boolean()) return;
    use->fail_plain("use_sliding_window true is not modelled (Qwen's windows on the layers from max_window_layers on); "
                    "set it false to plan full attention");
  }
  auto window = config.find("sliding_window");
  if (!window || window->value().is_null()) return;
  m.window_size = window->integer(1, kMaxSequence);
  m.window_attn_skip_freq = absent_pattern_freq;
  if (auto types = config.find("layer_types")) m.window_attn_skip_freq = skip_freq_of(*types, m.num_layers);
}

void refuse_field(const JsonReader& config, std::string_view key, const nlohmann::json& harmless, std::string_view why) {
  auto f = config.find(key);
  if (!f || f->value().is_null() || f->value() == harmless) return;
  f->fail_plain(fmt::format("{} {} is not modelled: {}", key, f->describe_value(), why));
}

}  // namespace twin::hf
