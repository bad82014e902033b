// Decoder-only transformer descriptions (dense and MoE), with the presets users start from.
// Field names follow Megatron-LM's TransformerConfig so that a scenario reads like a launch script.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/moe_routing.hpp"

namespace twin {

// swiglu: gated (Llama); gelu: ungated (GPT); squared_relu: ungated relu(x)^2 (So et al. 2021, Primer; Nemotron-4,
// Megatron's --squared-relu): to the simulator an element-wise kernel that moves the bytes GeLU's does.
// geglu: gated GeLU (tanh approximation; Gemma, Megatron's --gated-linear-unit with GeLU): SwiGLU's shapes and bytes.
// quick_geglu: gated quick GeLU, x sigmoid(1.702 x) on the gate, the up half plus glu_linear_offset, both clamped by
// activation_func_clamp_value (gpt-oss's; Megatron's --quick-geglu): SwiGLU's shapes and bytes.
enum class Activation : std::uint8_t { swiglu, gelu, squared_relu, geglu, quick_geglu };
// Gated activations read two halves of FC1's output (gate and up): FC1 is twice the FFN width.
inline bool is_gated(Activation a) {
  return a == Activation::swiglu || a == Activation::geglu || a == Activation::quick_geglu;
}
enum class Normalization : std::uint8_t { rmsnorm, layernorm };
// Megatron's --attention-backend. flash (FlashAttention) and fused (cuDNN fused attention through
// Transformer Engine) are fused kernels that keep only O and the softmax statistics; unfused materialises
// the s x s scores (Megatron's "unfused"/"local": batched GEMMs around a fused scale-mask-softmax).
enum class AttentionBackend { flash, fused, unfused };
// An MoE router's score of each expert (Megatron's --moe-router-score-function): the softmax over the experts, or
// the sigmoid of each logit (DeepSeek-V3).
enum class RouterScore : std::uint8_t { softmax, sigmoid };
inline bool is_fused_attention(AttentionBackend b) { return b != AttentionBackend::unfused; }

struct MoeConfig {
  int num_experts = 0;               // 0 means a dense model
  int top_k = 0;                     // Megatron: moe_router_topk
  std::int64_t ffn_hidden_size = 0;  // per expert; Megatron: moe_ffn_hidden_size
  int layer_freq = 1;                // every layer_freq-th layer is MoE (1 = all)
  // Load of the busiest expert over the mean (1.0 = perfectly balanced routing), every micro-batch and layer alike:
  // the old key, a RoutingDistribution::hot_expert. The expert GEMMs and the all-to-all of the busiest EP rank
  // scale with it, since every rank waits for that one. Unset with no `routing`: the profile's measurement for
  // this expert count and top-k where it has one (`twin calibrate --from-trace` of an MoE run), else balanced.
  std::optional<double> routing_imbalance;
  // The routing as a distribution (core/moe_routing.hpp); not with routing_imbalance.
  std::optional<RoutingModel> routing;
  // The first k layers keep a dense MLP of ffn_hidden_size (DeepSeek-V3's first_k_dense_replace; Megatron spells
  // it as a --moe-layer-freq list, "[0]*k+[1]*(L-k)").
  int first_dense_layers = 0;
  // Shared experts: an MLP every token passes through beside the routed experts, of all shared experts' widths
  // summed (Megatron's moe_shared_expert_intermediate_size = count x each one's width); 0: none. Split over TP
  // like a dense MLP.
  std::int64_t shared_expert_ffn_hidden_size = 0;
  // Megatron's --moe-expert-capacity-factor: each expert takes at most this factor times its mean copies (tokens x
  // top-k / experts), the rest dropped; absent: dropless. --moe-pad-expert-input-to-capacity: every expert computes
  // exactly its capacity (dropped above, padded below), so every EP rank's buffers and GEMMs are alike.
  std::optional<double> expert_capacity_factor;
  bool pad_expert_input_to_capacity = false;
  // The router as it chooses and weighs (Megatron's --moe-router-* flags, megatron/core/transformer/moe/moe_utils.py
  // topk_routing_with_score_function): what the executor runs. The simulator prices the loads of `routing` above and
  // no time of these. softmax: the top-k of the logits, their weights the softmax over the chosen k, or with
  // pre_softmax the softmax over every expert at the chosen ones, not renormalised (DeepSeek-V2, Qwen2-MoE: Hugging
  // Face's norm_topk_prob false); sigmoid: the top-k of the scores, their weights normalised over the chosen when
  // top_k > 1. The weights then times topk_scaling_factor (DeepSeek-V3's routed_scaling_factor 2.5). expert_bias
  // (sigmoid only, Megatron's rule): aux-loss-free balancing (DeepSeek-V3), a per-expert bias added to the scores for
  // the choice alone and moved by bias_update_rate after each step, up for an expert below the mean load, down above.
  RouterScore router_score_function = RouterScore::softmax;
  bool router_pre_softmax = false;
  double router_topk_scaling_factor = 1.0;
  bool router_expert_bias = false;
  double router_bias_update_rate = 1e-3;
  // Group-limited routing (Megatron's --moe-router-num-groups, --moe-router-group-topk; DeepSeek's n_group,
  // topk_group): the experts in router_num_groups equal groups of consecutive indices, each token choosing among the
  // router_group_topk groups whose top-(top_k / router_group_topk) values (what the top-k is taken of: logits,
  // scores, scores + bias) sum highest. 0: over all experts.
  int router_num_groups = 0;
  int router_group_topk = 0;
  // The load-balancing loss's weight (Megatron's --moe-aux-loss-coeff; 0: none, as with its load-balancing type
  // none): what twin execute trains with, no time. Megatron's default is 0; twin's 1e-2, Megatron-LM's Mixtral
  // example's, which every plan of twin ran with before the key.
  double aux_loss_coeff = 1e-2;
  double imbalance() const { return routing_imbalance.value_or(1.0); }
  // The busiest EP rank's routed copies over the mean rank's, each of `expert_parallel` ranks holding
  // num_experts / expert_parallel experts: the busiest expert's rank holds it (imbalance x the mean expert load)
  // and its other experts at the mean of the rest. One rank holding every expert gets every copy (1); one
  // expert per rank is the expert imbalance itself. A rank's grouped GEMMs and all-to-all scale with this.
  double rank_imbalance(int expert_parallel) const;
  bool operator==(const MoeConfig&) const = default;
};

// Multi-latent attention (DeepSeek-V2/V3; Megatron's MLATransformerConfig, whose names these are). Queries go
// through a latent of q_lora_rank (0: one projection h -> heads x (qk + pos)), keys and values through one of
// kv_lora_rank; each head's query and key are qk_head_dim wide plus qk_pos_emb_head_dim of RoPE (the key's RoPE
// part is one for all heads), its value v_head_dim wide. kv_lora_rank 0: not MLA.
struct MlaConfig {
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_head_dim = 0;          // Hugging Face: qk_nope_head_dim
  std::int64_t qk_pos_emb_head_dim = 0;  // Hugging Face: qk_rope_head_dim
  std::int64_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  bool operator==(const MlaConfig&) const = default;
};

struct ModelConfig {
  std::string name;
  int num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;
  int num_attention_heads = 0;
  int num_query_groups = 0;        // = heads for MHA; < heads for GQA
  std::int64_t kv_channels = 0;    // head dimension; hidden_size / heads unless given
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  Activation activation = Activation::swiglu;
  // quick_geglu's terms (Megatron's names): out = quick_gelu(min(gate, c)) (clamp(up, -c, c) + offset), c the clamp
  // value (0: none). gpt-oss: offset 1, clamp 7 (its swiglu_limit).
  double glu_linear_offset = 0;
  double activation_func_clamp_value = 0;
  Normalization normalization = Normalization::rmsnorm;
  AttentionBackend attention_backend = AttentionBackend::flash;
  bool untie_embeddings_and_output_weights = true;
  bool position_embedding_rope = true;  // false: learned absolute positions (GPT)
  // RoPE's base (theta; Megatron's --rotary-base, Hugging Face's rope_theta): no time or memory depends on it, but
  // megatron_args.txt must tell Megatron, whose default is 10000, the model's own.
  std::int64_t rotary_base = 10000;
  double hidden_dropout = 0.0;          // dropout keeps a 1-byte mask per element
  double attention_dropout = 0.0;
  bool add_bias_linear = false;         // Megatron's add_bias_linear: GPT linear layers have biases, Llama none
  MoeConfig moe;
  MlaConfig mla;
  // Qwen3, OLMo-2: an RMSNorm over each head's query and key (weights of head_dim, shared by the heads) before RoPE.
  bool qk_layernorm = false;
  // Sliding-window attention (Mistral, Gemma-2, gpt-oss): each query attends to itself and the window_size - 1 keys
  // before it (Hugging Face's sliding_window; Megatron's --window-size window_size-1,0); 0: the whole causal prefix.
  std::int64_t window_size = 0;
  // Megatron's window_attn_skip_freq: layer i (from 0) attends fully when (i + 1) % freq == 0 (2: Gemma-2's and
  // gpt-oss's alternation, windowed first); 0: every layer windowed.
  int window_attn_skip_freq = 0;
  // gpt-oss: one learned logit per head in each softmax's denominator (Megatron's softmax_type "learnable").
  bool attention_sinks = false;
  // Gemma-2's soft-capping, cap x tanh(x / cap), of the attention scores and of the output logits; 0: none.
  double attention_softcap = 0;
  double final_logit_softcap = 0;
  // Gemma-2: a norm on each branch's output before its residual add (four norms a layer, not two).
  bool post_norms = false;
  // Multi-token prediction (DeepSeek-V3, arXiv:2412.19437 section 2.2; Megatron's --mtp-num-layers, Hugging Face's
  // num_nextn_predict_layers): depth d (0-based) is transformer layer num_layers + d, after the decoder's, beside
  // the loss: the embedding of the tokens d + 1 further on, an RMSNorm of it and of the hidden states, their
  // concatenation projected 2h -> h, one transformer layer, a final norm, the shared output head and a loss.
  int mtp_num_layers = 0;

  // The transformer layers the model runs: the decoder's, then one per MTP depth.
  int transformer_layers() const { return num_layers + mtp_num_layers; }
  bool is_mtp_layer(int layer) const { return layer >= num_layers; }
  // The layer whose kind `layer` has: itself, or for an MTP depth the decoder's last (Megatron builds the MTP
  // layer from the last layer's spec: get_gpt_mtp_block_spec_for_backend, megatron/core/models/gpt/
  // gpt_layer_specs.py at NVIDIA/Megatron-LM d98e8a64dd).
  int kind_layer(int layer) const { return layer < num_layers ? layer : num_layers - 1; }
  bool is_moe() const { return moe.num_experts > 0; }
  // Megatron's moe_layer_freq after the first dense layers: layer i is MoE when i >= first_dense_layers and
  // i % freq == 0 (DeepSeek-V3's rule).
  bool is_moe_layer(int layer) const {
    const int l = kind_layer(layer);
    return is_moe() && l >= moe.first_dense_layers && l % moe.layer_freq == 0;
  }
  // Whether layer i's attention is windowed.
  bool is_windowed_layer(int layer) const {
    const int l = kind_layer(layer);
    return window_size > 0 && (window_attn_skip_freq == 0 || (l + 1) % window_attn_skip_freq != 0);
  }
  int num_moe_layers() const;
  bool operator==(const ModelConfig&) const = default;
};

// The one description of a model's parameters: each part once, grouped by how Megatron's tensor and expert
// parallelism split it. Totals (below) sum the parts; strategies/sharded_parameters.hpp divides them per GPU.
// One transformer layer: the attention and dense MLP weights and their column-parallel biases are split over
// TP; norms, the router and row-parallel biases are replicated; experts are whole, split over EP.
struct LayerParameterGroups {
  std::int64_t attention_weights = 0;  // QKV (GQA-aware) and the output projection
  std::int64_t attention_biases = 0;   // QKV bias (column-parallel) and attention sinks (one per head)
  std::int64_t mlp_weights = 0;        // the dense MLP's two or three matrices; 0 in an MoE layer
  std::int64_t mlp_biases = 0;         // the dense MLP's (or the shared experts') FC1 bias (column-parallel)
  std::int64_t mlp_weights_shared = 0; // an MoE layer's shared experts (split over TP like a dense MLP)
  // Two norms (four with post_norms), QK-norm's, row-parallel biases (projection, FC2), the router, and MLA's down
  // projections and latent norms (every TP rank holds them whole, as Megatron's "duplicated" linears).
  std::int64_t replicated = 0;
  // Of `replicated`, MLA's down projections and latent norms: Megatron marks them sequence_parallel and, under SP,
  // sums their gradients over TP once a step (finalize_model_grads' _allreduce_non_tensor_model_parallel_grads).
  std::int64_t duplicated_linears = 0;
  // An MTP depth's projection of [embedding; hidden] 2h -> h (column-parallel, split over TP; its two input norms
  // and its final norm are in `replicated`); 0 in a decoder layer.
  std::int64_t mtp_projection = 0;
  int experts = 0;                     // num_experts in an MoE layer, else 0
  std::int64_t per_expert = 0;         // one expert's MLP, its biases included
  std::int64_t tp_split() const {
    return attention_weights + attention_biases + mlp_weights + mlp_biases + mlp_weights_shared + mtp_projection;
  }
};
LayerParameterGroups layer_parameter_groups(const ModelConfig& model, int layer);

// Outside the layers, for an embedding of `vocab_rows` rows (the vocabulary, or Megatron's padded one).
struct EmbeddingAndOutputParameters {
  std::int64_t word_embedding = 0;      // vocab_rows x hidden (vocab-parallel over TP)
  std::int64_t position_embedding = 0;  // learned positions; 0 with RoPE (replicated)
  std::int64_t output_projection = 0;   // as large as the word embedding when untied, else 0 (tied to it)
  std::int64_t final_norm = 0;          // replicated
};
EmbeddingAndOutputParameters embedding_and_output_parameters(const ModelConfig& model, std::int64_t vocab_rows);

// Parameter counts (embedding and output projection included; MoE counts all experts; MTP depths included, sharing
// the embedding and the output projection as Megatron trains them).
std::int64_t parameter_count(const ModelConfig& model);
// Parameters touched per token: MoE counts top_k experts instead of all.
std::int64_t active_parameter_count(const ModelConfig& model);
// Parameters of one transformer layer (attention, MLP or experts, norms; an MTP depth's norms and projection).
std::int64_t layer_parameter_count(const ModelConfig& model, int layer);
// Input embedding, learned position embedding (when not RoPE) and the output projection when untied.
std::int64_t embedding_parameter_count(const ModelConfig& model);

// Presets, case-insensitive: llama2-7b/13b/70b, llama3-8b/70b/405b, gpt3-175b, mixtral-8x7b/8x22b and
// the GPT family of Megatron-LM's scaling study (Narayanan et al. 2021): megatron-gpt-1.7b ... megatron-gpt-1t.
std::optional<ModelConfig> model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

std::string to_string(Activation a);
std::string to_string(Normalization n);
std::string to_string(AttentionBackend b);
std::string to_string(RouterScore score);
std::optional<Activation> activation_from_string(std::string_view s);
std::optional<Normalization> normalization_from_string(std::string_view s);
std::optional<AttentionBackend> attention_backend_from_string(std::string_view s);
std::optional<RouterScore> router_score_from_string(std::string_view s);

}  // namespace twin
