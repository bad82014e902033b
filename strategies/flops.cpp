// Megatron-LM's num_floating_point_operations, term by term: 3 passes (forward, input gradient, weight
// gradient) x 2 (multiply-add) x the GEMM sizes per token, plus causal core attention (Q K^T and
// attention x V, halved by the mask). The vocabulary is the model's, unpadded: padding is not model work. An MTP
// depth counts as Megatron counts it (megatron/training/training.py at NVIDIA/Megatron-LM d98e8a64dd): a layer of the
// last layer's kind, eh_proj's 2h x h and a logit of its own; Megatron's 3h of its norms twin leaves out, as it
// leaves out every norm.
#include "strategies/flops.hpp"

#include <algorithm>

#include "core/op.hpp"


namespace twin {
namespace {

double head_dim(const ModelConfig& m) {
  return m.kv_channels > 0 ? static_cast<double>(m.kv_channels)
                           : static_cast<double>(m.hidden_size) / m.num_attention_heads;
}

// MLA's projections per token: the query's down and up (or direct) projection, the keys' and values' down
// projection (with the shared RoPE key) and up projection, and the output projection from heads x v_head_dim.
double mla_attention_macs_per_token(const ModelConfig& m) {
  const MlaConfig& a = m.mla;
  const double h = static_cast<double>(m.hidden_size), heads = m.num_attention_heads;
  const double q_head = static_cast<double>(a.qk_head_dim + a.qk_pos_emb_head_dim);
  const double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank * heads * q_head : h * heads * q_head;
  const double kv = h * static_cast<double>(a.kv_lora_rank + a.qk_pos_emb_head_dim) +
                    a.kv_lora_rank * heads * static_cast<double>(a.qk_head_dim + a.v_head_dim);
  return q + kv + heads * a.v_head_dim * h;
}

// Forward FLOPs per token of one layer's weights (2 x multiply-adds), without core attention.
double layer_weight_flops_per_token(const ModelConfig& m, int layer) {
  const double h = static_cast<double>(m.hidden_size), d = head_dim(m);
  const double gated = is_gated(m.activation) ? 3 : 2;
  double macs = h * (m.num_attention_heads + 2.0 * m.num_query_groups) * d  // QKV
                + m.num_attention_heads * d * h;                            // output projection
  if (m.mla.enabled()) macs = mla_attention_macs_per_token(m);
  if (m.is_moe_layer(layer))
    macs += static_cast<double>(m.moe.ffn_hidden_size) * h * m.moe.top_k * gated + h * m.moe.num_experts +
            static_cast<double>(m.moe.shared_expert_ffn_hidden_size) * h * gated;
  else
    macs += h * static_cast<double>(m.ffn_hidden_size) * gated;
  if (m.is_mtp_layer(layer)) macs += 2 * h * h + h * static_cast<double>(m.vocab_size);  // eh_proj, its logits
  return 2 * macs;
}

// Forward FLOPs per token of causal core attention: 2 x seq x heads x (d_qk + d_v) (Q K^T and P V) x the share of the
// scores the mask keeps (a half; less on a windowed layer).
double attention_flops_per_token(const ModelConfig& m, int layer, std::int64_t seq_length) {
  AttentionShape a;
  a.seq_q = a.seq_kv = seq_length;
  a.window = m.is_windowed_layer(layer) ? m.window_size : 0;
  // Q K^T over the queries' and keys' head dim, P V over the values' (MLA: nope + rope, and v_head_dim).
  const double qk = m.mla.enabled() ? static_cast<double>(m.mla.qk_head_dim + m.mla.qk_pos_emb_head_dim) : head_dim(m);
  const double v = m.mla.enabled() ? static_cast<double>(m.mla.v_head_dim) : head_dim(m);
  return 2.0 * static_cast<double>(seq_length) * m.num_attention_heads * (qk + v) * attention_score_fraction(a);
}

double tokens_per_iteration(const Scenario& s) {
  return static_cast<double>(s.training.global_batch_size) * static_cast<double>(s.training.seq_length);
}

}  // namespace

double model_flops_per_iteration(const Scenario& scenario) {
  const ModelConfig& m = scenario.model;
  double forward = 2.0 * static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);  // logits
  for (int layer = 0; layer < m.transformer_layers(); ++layer)
    forward += layer_weight_flops_per_token(m, layer) + attention_flops_per_token(m, layer, scenario.training.seq_length);
  return 3 * forward * tokens_per_iteration(scenario);
}

double hardware_flops_per_iteration(const Scenario& scenario, Recompute recompute, RecomputeModuleMask modules) {
  const ModelConfig& m = scenario.model;
  double repeated = 0;  // forward work done again in backward, per token
  for (int layer = 0; layer < m.transformer_layers(); ++layer) {
    if (recompute == Recompute::selective && recomputes(modules, RecomputeModule::core_attn))
      repeated += attention_flops_per_token(m, layer, scenario.training.seq_length);
    else if (recompute == Recompute::full)
      repeated += layer_weight_flops_per_token(m, layer) + attention_flops_per_token(m, layer, scenario.training.seq_length);
  }
  return model_flops_per_iteration(scenario) + repeated * tokens_per_iteration(scenario);
}

double gpu_peak_flops(const Scenario& scenario, const GpuSpec& gpu) {
  const bool fp8 = scenario.training.fp8 && gpu.peak_fp8_tflops > 0;
  return (fp8 ? gpu.peak_fp8_tflops : gpu.peak_bf16_tflops) * 1e12;
}

double peak_flops_of_first_gpus(const Scenario& scenario, int gpus) {
  double peak_flops = 0;
  int remaining = gpus;
  for (const NodeGroup& group : scenario.cluster.node_groups) {
    const int used = std::min(remaining, group.count * group.gpus_per_node);
    peak_flops += used * gpu_peak_flops(scenario, group.gpu);
    remaining -= used;
  }
  return peak_flops;
}

std::string peak_precision_text(const Scenario& scenario) {
  bool fp8 = false, bf16 = false;
  for (const NodeGroup& group : scenario.cluster.node_groups)
    (scenario.training.fp8 && group.gpu.peak_fp8_tflops > 0 ? fp8 : bf16) = true;
  if (fp8 && bf16) return "dense FP8 (bf16 where a GPU has no FP8 peak)";
  return fp8 ? "dense FP8" : "dense bf16";
}

Throughput throughput(const Scenario& scenario, const Strategy& strategy, double iteration_s) {
  Throughput t;
  t.iteration_s = iteration_s;
  if (iteration_s <= 0) return t;
  const double peak_flops = peak_flops_of_first_gpus(scenario, strategy.world_size());
  t.tokens_per_s = tokens_per_iteration(scenario) / iteration_s;
  if (peak_flops > 0) {
    t.mfu = model_flops_per_iteration(scenario) / (iteration_s * peak_flops);
    t.hfu = hardware_flops_per_iteration(scenario, strategy.recompute, recomputed_modules(strategy)) / (iteration_s * peak_flops);
  }
  return t;
}

}  // namespace twin
