// The field readers the Hugging Face config families share (core/hf_config.cpp, core/hf_config_families.cpp):
// each reads one field with its range and names the field's JSON path when it is missing or bad.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/json_reader.hpp"
#include "core/model.hpp"

namespace twin::hf {

int required_int(const JsonReader& config, std::string_view key, std::int64_t max);
double dropout(const JsonReader& config, std::string_view key, double absent);
// RoPE's base: a float in config.json (500000.0), an integer to Megatron's --rotary-base; absent, 10000.
std::int64_t rotary_base(const JsonReader& config, std::string_view key);
bool optional_bool(const JsonReader& config, std::string_view key, bool absent);
// GPT-2 and GPT-NeoX spell GeLU several ways (gelu, gelu_new, gelu_fast, gelu_pytorch_tanh): all one cost.
void expect_gelu(const JsonReader& config, std::string_view key);
// Query groups and head width, checked against the heads.
void attention_shape(const JsonReader& config, ModelConfig& m, std::string_view kv_heads_key);
// The shape fields Llama-style configs and GPT-NeoX name alike.
void llama_style_shape(const JsonReader& config, ModelConfig& m);
// Sliding windows: "sliding_window" (null or absent: none) over the layers "layer_types" lists ("sliding_attention",
// "full_attention"; it must be a pattern Megatron's window_attn_skip_freq states: every layer windowed, or the
// full ones every n-th), else every `absent_pattern_freq`-th layer full (0: none). Qwen's "use_sliding_window"
// true is refused (its max_window_layers split is not modelled); false means no window.
void sliding_window(const JsonReader& config, ModelConfig& m, int absent_pattern_freq);
// A field whose presence (or, for a number or boolean, a value other than `harmless`) asks for what twin does not
// model: the error names the field and says why.
void refuse_field(const JsonReader& config, std::string_view key, const nlohmann::json& harmless, std::string_view why);

}  // namespace twin::hf
