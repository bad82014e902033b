// Models given as a Hugging Face config.json (scenario "model": {"hf_config": "path/to/config.json"}): the
// file fills the model's fields as a preset would, and the other keys of "model" override them.
// Architectures (config "architectures"[0], else "model_type"):
//   LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, MixtralForCausalLM: num_hidden_layers,
//     hidden_size, intermediate_size, num_attention_heads, num_key_value_heads (default: the heads),
//     head_dim (default: hidden_size / heads), vocab_size, max_position_embeddings, tie_word_embeddings
//     (default false), hidden_act "silu" (a gated MLP: SwiGLU), rms_norm_eps (RMSNorm), RoPE,
//     attention_bias / mlp_bias (default false; either true means biases), attention_dropout;
//     Mixtral adds num_local_experts and num_experts_per_tok (every layer MoE, experts of intermediate_size).
//   GPT2LMHeadModel: n_layer, n_embd, n_head, n_inner (default 4 n_embd), vocab_size, n_positions,
//     activation_function gelu*, LayerNorm, learned positions, biases, tied embeddings, resid_pdrop, attn_pdrop.
//   GPTNeoXForCausalLM: num_hidden_layers, hidden_size, intermediate_size, num_attention_heads, vocab_size,
//     max_position_embeddings, hidden_act gelu*, LayerNorm, RoPE, biases, tie_word_embeddings (default false).
//   The Llama-style families read sliding_window (Mistral; null: none).
//   Qwen3, Qwen3-MoE, DeepSeek-V3, gpt-oss, Gemma-2: core/hf_config_families.hpp.
// What changes no time or memory is not read (Qwen2's QKV-only bias is read as biases everywhere); what twin does
// not model and would change them (multi-token prediction, Qwen's partial sliding windows, ...) is refused by name.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/model.hpp"

namespace twin {

// The model `config` describes. Throws InputError naming `config_file` and the JSON path of a missing or
// bad field, or of an architecture twin does not map ("architectures", listing those it does).
ModelConfig model_from_hf_config(const nlohmann::json& config, const std::string& config_file);

// Reads the file the scenario's "hf_config" value names (relative to the scenario file's folder) with
// read_input_file and parse_input_json, and maps it. An unreadable file is an error at the scenario's
// /model/hf_config; a malformed one names the config file and its JSON path.
ModelConfig load_hf_config(const JsonReader& hf_config);

}  // namespace twin
