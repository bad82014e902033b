// The architecture variants of 2025-26 beside the classic decoder (core/model.hpp's MlaConfig, QK-norm, sliding
// windows, attention sinks, soft-capping, post norms, fine-grained and shared experts, first dense layers): reading
// them from a scenario's model section, and the checks every reader of a model (scenario, Hugging Face config)
// applies once the model is filled.
#pragma once
#include "core/json_reader.hpp"
#include "core/model.hpp"

namespace twin {

// The model section's variant keys (qk_layernorm, window_size, window_attn_skip_freq, attention_sinks,
// attention_softcap, final_logit_softcap, post_norms, mla, and quick_geglu's glu_linear_offset and
// activation_func_clamp_value), each absent key keeping `m`'s value.
void parse_model_variants(const JsonReader& model_section, ModelConfig& m);
// The moe section's first_dense_layers, shared_expert_ffn_hidden_size, capacity keys and router keys (with
// Megatron's rules on the router's combinations, at the key given).
void parse_moe_variants(const JsonReader& moe_section, MoeConfig& moe);
// What no reader may accept, as one line at `where`: MLA with QK-norm, biases or learned positions; a first dense
// layer count not below the layer count; router groups that do not divide the experts or hold fewer than top_k.
void check_model_variants(const JsonReader& where, const ModelConfig& m);

}  // namespace twin
