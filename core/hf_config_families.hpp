// The Hugging Face config families of 2025-26 (field names as transformers' config classes have them, read at
// huggingface/transformers 02b8f42b4240 (gpt_oss), 0fc683d1cd94 (deepseek_v3) and the published config.json files
// of each checkpoint, tests/core/fixtures/hf/):
//   Qwen3ForCausalLM (qwen3): Llama's fields, head_dim, QK-norm (always on in Qwen3); use_sliding_window true refused.
//   Qwen3MoeForCausalLM (qwen3_moe): Qwen3's, num_experts, num_experts_per_tok, moe_intermediate_size; every layer
//     MoE (decoder_sparse_step other than 1 and a non-empty mlp_only_layers are refused by name).
//   Qwen2MoeForCausalLM (qwen2_moe, Qwen1.5-MoE and Qwen2-MoE): Qwen3-MoE's expert fields and one shared expert of
//     shared_expert_intermediate_size, SwiGLU, no QK-norm. Not counted: the QKV biases of Qwen2's attention and
//     the shared expert's sigmoid gate (hidden_size weights each a layer, under 0.01% of any published checkpoint).
//   DeepseekV2ForCausalLM (deepseek_v2) and DeepseekV3ForCausalLM (deepseek_v3): MLA (q_lora_rank, null in
//     V2-Lite: the direct query projection; kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim),
//     n_routed_experts, n_shared_experts of moe_intermediate_size, first_k_dense_replace, moe_layer_freq;
//     num_nextn_predict_layers > 0 (V3's multi-token prediction) refused by name. The gate as the router's keys:
//     scoring_func, norm_topk_prob, routed_scaling_factor, topk_method noaux_tc (V3's expert bias), and the group
//     limits of group_limited_greedy and noaux_tc (n_group, topk_group) as Megatron's group-limited routing.
//   Qwen's MoE gates: norm_topk_prob false (Qwen1.5/2-MoE) is the router's pre-softmax.
//   GptOssForCausalLM (gpt_oss): Llama's fields, num_local_experts, num_experts_per_tok, experts of
//     intermediate_size, biases (attention_bias), attention sinks, sliding_window over layer_types.
//   Gemma2ForCausalLM (gemma2): Llama's fields, gated GeLU (hidden_activation), four norms a layer, tied embeddings,
//     attn_logit_softcapping, final_logit_softcapping, sliding_window on every other layer.
//   Gemma3ForCausalLM (gemma3_text, the text-only Gemma-3 1B): Gemma-2's, QK-norm, sliding_window with every
//     sliding_window_pattern-th layer full (absent: 6) or layer_types; rope_local_base_freq changes no time.
#pragma once
#include "core/json_reader.hpp"
#include "core/model.hpp"

namespace twin::hf {

void qwen3(const JsonReader& config, ModelConfig& m);
void qwen3_moe(const JsonReader& config, ModelConfig& m);
void qwen2_moe(const JsonReader& config, ModelConfig& m);
void deepseek(const JsonReader& config, ModelConfig& m);
void gpt_oss(const JsonReader& config, ModelConfig& m);
void gemma2(const JsonReader& config, ModelConfig& m);
void gemma3(const JsonReader& config, ModelConfig& m);

}  // namespace twin::hf
