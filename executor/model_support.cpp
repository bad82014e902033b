// Checked in the order a user would fix them: the architecture of 2025-26 first (one flag each), then the
// GPT-style features a Llama-style executor lacks.
#include "executor/model_support.hpp"

#include "core/model_limits.hpp"

namespace twin::exec {

std::optional<UnsupportedModelFeature> first_unsupported_feature(const ModelConfig& m) {
  const auto unsupported = [](const char* path, const char* feature) {
    return std::optional<UnsupportedModelFeature>(UnsupportedModelFeature{path, feature});
  };
  // QK-norm runs as Qwen3's (RMSNorm over each head); a LayerNorm model's would need a bias and a strided LayerNorm.
  if (m.qk_layernorm && m.normalization == Normalization::layernorm)
    return unsupported("qk_layernorm", "QK-norm in a LayerNorm model");
  // Sliding windows run on a layer's own attention (each op says its window); MLA's attention takes none.
  if (m.window_size > 0 && m.mla.enabled())
    return unsupported("window_size", "sliding-window multi-latent attention");
  // Sinks rescale any backend's output and log-sum-exp after its attention (gpu/kernels.hpp); MLA's calls
  // return no log-sum-exp that the executor keeps.
  if (m.attention_sinks && m.mla.enabled())
    return unsupported("attention_sinks", "attention sinks with multi-latent attention");
  // Soft-capped scores run in every backend's attention of whole sequences (gpu/attention.hpp); MLA's calls take none.
  if (m.attention_softcap > 0 && m.mla.enabled())
    return unsupported("attention_softcap", "soft-capped multi-latent attention");
  // Post norms run in dense layers (Gemma-2 and 3's): an MoE layer's combine and MLA's blocks hand their branch on
  // as a pre-norm layer's.
  if (m.post_norms && m.is_moe()) return unsupported("post_norms", "post norms in a mixture-of-experts model");
  if (m.post_norms && m.mla.enabled()) return unsupported("post_norms", "post norms with multi-latent attention");
  if (m.mtp_num_layers > 0) return unsupported("mtp_num_layers", "multi-token prediction layers");
  // An expert capacity drops copies after the router (executor/gpu/moe_block.hpp); aux-loss-free balancing would
  // step its biases by the kept copies (Megatron's _apply_expert_bias reads the map after the dropping), where the
  // executor's loads are the routed ones.
  if (m.is_moe() && m.moe.expert_capacity_factor && m.moe.router_expert_bias)
    return unsupported("moe/expert_capacity_factor", "an expert capacity with aux-loss-free balancing");
  if (m.is_moe() && m.moe.router_group_topk > 0 && m.moe.router_num_groups > kMaxExecutedRouterGroups)
    return unsupported("moe/router_num_groups", "group-limited routing over more than 32 groups");
  // Hidden dropout runs in dense layers with pre norms (Megatron's bias-dropout-add, executor/gpu/
  // dense_block_residual.cpp): an MoE layer's combine, MLA's blocks and a post norm hand their branch's gradient on
  // where the residual's backward leaves the undropped one.
  if (m.hidden_dropout > 0 && m.is_moe()) return unsupported("hidden_dropout", "hidden dropout in expert layers");
  if (m.hidden_dropout > 0 && m.mla.enabled())
    return unsupported("hidden_dropout", "hidden dropout with multi-latent attention");
  if (m.hidden_dropout > 0 && m.post_norms) return unsupported("hidden_dropout", "hidden dropout with post norms");
  if (m.hidden_dropout > 0 && m.hidden_size % 8 != 0)  // the kernels draw and move eight elements at a time
    return unsupported("hidden_dropout", "hidden dropout over a hidden size that is no multiple of 8");
  // Attention dropout runs inside cuDNN's fused attention (its SDPA dropout: a Philox RNG node, gpu/attention.hpp);
  // MLA's attention calls take none, and cuDNN fuses no dropout with a sliding window.
  if (m.attention_dropout > 0 && m.mla.enabled())
    return unsupported("attention_dropout", "attention dropout with multi-latent attention");
  if (m.attention_dropout > 0 && m.window_size > 0)
    return unsupported("attention_dropout", "attention dropout with sliding-window attention");
  if (m.attention_dropout > 0 && m.attention_softcap > 0)  // no cuDNN graph of the two was tried on a GPU
    return unsupported("attention_dropout", "attention dropout with soft-capped attention scores");
  if (m.attention_dropout > 0 && m.attention_sinks)  // no run of the two was checked on a GPU
    return unsupported("attention_dropout", "attention dropout with attention sinks");
  // Unfused attention runs Megatron-LM's kernels over whole causal scores (gpu/unfused_attention.hpp): none of the
  // score variants above, and MLA's block calls the fused backends itself.
  if (!is_fused_attention(m.attention_backend)) {
    if (m.mla.enabled()) return unsupported("attention_backend", "unfused multi-latent attention");
    if (m.window_size > 0) return unsupported("window_size", "sliding-window attention run unfused");
    if (m.attention_softcap > 0) return unsupported("attention_softcap", "soft-capped attention run unfused");
    if (m.attention_sinks) return unsupported("attention_sinks", "attention sinks run unfused");
  }
  return std::nullopt;
}

}  // namespace twin::exec
