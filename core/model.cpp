// Model presets (published configs) and parameter counting for dense and MoE decoders.
// Counting follows Megatron-LM's layer structure: QKV (GQA-aware) and output projections, an MLP of two
// (GeLU) or three (SwiGLU) matrices or that many per expert plus a router, and one norm before each block.
#include "core/model.hpp"

#include <algorithm>
#include <cctype>

namespace twin {

namespace {

std::string lowercase_text(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The fields every decoder preset sets; the rest keep ModelConfig's defaults (Llama's choices: SwiGLU,
// RMSNorm, RoPE, untied embeddings, no biases).
ModelConfig decoder(std::string name, int layers, std::int64_t hidden, int heads, int groups, std::int64_t ffn,
                    std::int64_t vocab, std::int64_t max_positions) {
  ModelConfig m;
  m.name = std::move(name);
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.ffn_hidden_size = ffn;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = hidden / heads;
  m.vocab_size = vocab;
  m.max_position_embeddings = max_positions;
  return m;
}

ModelConfig llama(std::string name, int layers, std::int64_t hidden, int heads, int groups, std::int64_t ffn,
                  std::int64_t vocab, std::int64_t max_positions) {
  ModelConfig m = decoder(std::move(name), layers, hidden, heads, groups, ffn, vocab, max_positions);
  m.activation = Activation::swiglu;
  m.normalization = Normalization::rmsnorm;
  m.untie_embeddings_and_output_weights = true;
  m.position_embedding_rope = true;
  m.add_bias_linear = false;
  return m;
}

// Llama 3 and 3.1: rope_theta 500000 (their Hugging Face config.json).
ModelConfig llama3(std::string name, int layers, std::int64_t hidden, int heads, int groups, std::int64_t ffn,
                   std::int64_t vocab, std::int64_t max_positions) {
  ModelConfig m = llama(std::move(name), layers, hidden, heads, groups, ffn, vocab, max_positions);
  m.rotary_base = 500000;
  return m;
}

// Mixtral: rope_theta 1000000 (its Hugging Face config.json).
ModelConfig mixtral(std::string name, int layers, std::int64_t hidden, int heads, int groups, std::int64_t ffn,
                    std::int64_t vocab, std::int64_t max_positions) {
  ModelConfig m = llama(std::move(name), layers, hidden, heads, groups, ffn, vocab, max_positions);
  m.rotary_base = 1000000;
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.ffn_hidden_size = ffn;
  m.moe.layer_freq = 1;
  return m;
}

// GPT-style: GeLU MLP of width 4h (unless given), LayerNorm, biases, tied embeddings, learned positions.
ModelConfig gpt(std::string name, int layers, std::int64_t hidden, int heads, std::int64_t ffn, std::int64_t vocab,
                std::int64_t max_positions) {
  ModelConfig m = decoder(std::move(name), layers, hidden, heads, heads, ffn, vocab, max_positions);
  m.activation = Activation::gelu;
  m.normalization = Normalization::layernorm;
  m.untie_embeddings_and_output_weights = false;
  m.position_embedding_rope = false;
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  m.add_bias_linear = true;
  return m;
}

ModelConfig megatron_gpt(std::string name, int layers, std::int64_t hidden, int heads) {
  return gpt(std::move(name), layers, hidden, heads, 4 * hidden, 51200, 2048);
}

// Sources: Llama-2 paper / HF config.json; Llama-3(.1) HF config.json; GPT-3 paper Table 2.1;
// Mixtral HF config.json; Narayanan et al. SC'21 Table 1 for the Megatron GPT family.
const std::vector<ModelConfig>& model_presets() {
  static const std::vector<ModelConfig> all = {
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
      llama3("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
      llama3("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
      llama3("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 131072),
      gpt("gpt3-175b", 96, 12288, 96, 49152, 50257, 2048),
      mixtral("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768),
      mixtral("mixtral-8x22b", 56, 6144, 48, 8, 16384, 32768, 65536),
      megatron_gpt("megatron-gpt-1.7b", 24, 2304, 24),
      megatron_gpt("megatron-gpt-3.6b", 30, 3072, 32),
      megatron_gpt("megatron-gpt-7.5b", 36, 4096, 32),
      megatron_gpt("megatron-gpt-18.4b", 40, 6144, 48),
      megatron_gpt("megatron-gpt-39.1b", 48, 8192, 64),
      megatron_gpt("megatron-gpt-76.1b", 60, 10240, 80),
      megatron_gpt("megatron-gpt-145.6b", 80, 12288, 96),
      megatron_gpt("megatron-gpt-310.1b", 96, 16384, 128),
      megatron_gpt("megatron-gpt-529.6b", 105, 20480, 128),
      megatron_gpt("megatron-gpt-1t", 128, 25600, 160),
  };
  return all;
}

// kv_channels, or hidden_size / heads when it is not set.
std::int64_t head_dim(const ModelConfig& m) {
  return m.kv_channels > 0 ? m.kv_channels : m.hidden_size / m.num_attention_heads;
}

std::int64_t norm_parameters(const ModelConfig& m) {
  return m.normalization == Normalization::rmsnorm ? m.hidden_size : 2 * m.hidden_size;  // weight (+ bias)
}

std::int64_t fc1_width(const ModelConfig& m, std::int64_t ffn) {
  return is_gated(m.activation) ? 2 * ffn : ffn;  // gate and up halves
}

std::int64_t mlp_weights(const ModelConfig& m, std::int64_t ffn) {
  return m.hidden_size * fc1_width(m, ffn) + ffn * m.hidden_size;
}

std::int64_t layer_total(const LayerParameterGroups& g, int experts_counted) {
  return g.tp_split() + g.replicated + experts_counted * g.per_expert;
}

std::int64_t count_parameters(const ModelConfig& m, bool active_only) {
  std::int64_t total = embedding_parameter_count(m) + norm_parameters(m);  // + final norm
  for (int layer = 0; layer < m.transformer_layers(); ++layer)
    total += layer_total(layer_parameter_groups(m, layer), active_only ? m.moe.top_k : m.moe.num_experts);
  return total;
}

}  // namespace

double MoeConfig::rank_imbalance(int expert_parallel) const {
  const double experts = num_experts, per_rank = experts / expert_parallel, busiest = imbalance();
  if (num_experts <= 1) return busiest;
  const double others_mean = (experts - busiest) / (experts - 1);  // in units of the mean expert load
  return (busiest + (per_rank - 1) * others_mean) / per_rank;
}

int ModelConfig::num_moe_layers() const {
  if (!is_moe()) return 0;
  int count = 0;
  for (int layer = 0; layer < num_layers; ++layer) count += is_moe_layer(layer) ? 1 : 0;
  return count;
}

namespace {

// Attention's weights: QKV (GQA-aware) and the output projection, or MLA's projections (the down projections and
// their latent norms whole on every TP rank, the up projections and the output projection split over TP).
void attention_parameters(const ModelConfig& m, LayerParameterGroups& g) {
  const std::int64_t h = m.hidden_size, heads = m.num_attention_heads;
  if (m.mla.enabled()) {
    const MlaConfig& a = m.mla;
    const std::int64_t q_head = a.qk_head_dim + a.qk_pos_emb_head_dim;
    if (a.q_lora_rank > 0) {
      g.duplicated_linears += h * a.q_lora_rank + a.q_lora_rank;  // q down projection and its norm
      g.attention_weights += a.q_lora_rank * heads * q_head;      // q up projection
    } else {
      g.attention_weights += h * heads * q_head;
    }
    g.duplicated_linears += h * (a.kv_lora_rank + a.qk_pos_emb_head_dim) + a.kv_lora_rank;  // kv down (+ RoPE key), norm
    g.replicated += g.duplicated_linears;
    g.attention_weights += a.kv_lora_rank * heads * (a.qk_head_dim + a.v_head_dim) + heads * a.v_head_dim * h;
    return;
  }
  const std::int64_t d = head_dim(m), q_width = heads * d, kv_width = m.num_query_groups * d;
  g.attention_weights = h * (q_width + 2 * kv_width) + q_width * h;
  if (m.add_bias_linear) g.attention_biases = q_width + 2 * kv_width;
  if (m.qk_layernorm) g.replicated += 2 * (m.normalization == Normalization::rmsnorm ? d : 2 * d);
}

}  // namespace

LayerParameterGroups layer_parameter_groups(const ModelConfig& m, int layer) {
  const std::int64_t h = m.hidden_size;
  LayerParameterGroups g;
  g.replicated = (m.post_norms ? 4 : 2) * norm_parameters(m);
  attention_parameters(m, g);
  if (m.is_mtp_layer(layer)) {  // enorm, hnorm, final_layernorm, eh_proj (multi_token_prediction.py)
    g.replicated += 3 * norm_parameters(m);
    g.mtp_projection = 2 * h * h;
  }
  if (m.attention_sinks) g.attention_biases += m.num_attention_heads;
  if (m.add_bias_linear) g.replicated += h;  // the projection's (row-parallel) bias
  if (m.is_moe_layer(layer)) {
    const std::int64_t ffn = m.moe.ffn_hidden_size;
    // The router, with a bias under add_bias_linear (Megatron's TopKRouter; gpt-oss's router has one).
    g.replicated += h * m.moe.num_experts + (m.add_bias_linear ? m.moe.num_experts : 0);
    g.experts = m.moe.num_experts;
    g.per_expert = mlp_weights(m, ffn) + (m.add_bias_linear ? fc1_width(m, ffn) + h : 0);
    const std::int64_t shared_ffn = m.moe.shared_expert_ffn_hidden_size;
    g.mlp_weights_shared = shared_ffn > 0 ? mlp_weights(m, shared_ffn) : 0;
    if (shared_ffn > 0 && m.add_bias_linear) {  // the shared experts' MLP has a dense MLP's biases
      g.mlp_biases = fc1_width(m, shared_ffn);
      g.replicated += h;
    }
  } else {
    g.mlp_weights = mlp_weights(m, m.ffn_hidden_size);
    if (m.add_bias_linear) {
      g.mlp_biases = fc1_width(m, m.ffn_hidden_size);
      g.replicated += h;  // FC2's (row-parallel) bias
    }
  }
  return g;
}

EmbeddingAndOutputParameters embedding_and_output_parameters(const ModelConfig& m, std::int64_t vocab_rows) {
  EmbeddingAndOutputParameters p;
  p.word_embedding = vocab_rows * m.hidden_size;
  if (!m.position_embedding_rope) p.position_embedding = m.max_position_embeddings * m.hidden_size;
  if (m.untie_embeddings_and_output_weights) p.output_projection = p.word_embedding;
  p.final_norm = norm_parameters(m);
  return p;
}

std::int64_t embedding_parameter_count(const ModelConfig& m) {
  const EmbeddingAndOutputParameters p = embedding_and_output_parameters(m, m.vocab_size);
  return p.word_embedding + p.position_embedding + p.output_projection;
}

std::int64_t layer_parameter_count(const ModelConfig& m, int layer) {
  return layer_total(layer_parameter_groups(m, layer), m.moe.num_experts);
}

std::int64_t parameter_count(const ModelConfig& m) { return count_parameters(m, false); }
std::int64_t active_parameter_count(const ModelConfig& m) { return count_parameters(m, true); }

std::optional<ModelConfig> model_preset(std::string_view name) {
  const std::string wanted = lowercase_text(name);
  for (const ModelConfig& m : model_presets())
    if (m.name == wanted) return m;
  return std::nullopt;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const ModelConfig& m : model_presets()) names.push_back(m.name);
  return names;
}

std::string to_string(Activation a) {
  switch (a) {
    case Activation::swiglu: return "swiglu";
    case Activation::gelu: return "gelu";
    case Activation::squared_relu: return "squared_relu";
    case Activation::geglu: return "geglu";
    case Activation::quick_geglu: break;
  }
  return "quick_geglu";
}
std::string to_string(Normalization n) { return n == Normalization::rmsnorm ? "rmsnorm" : "layernorm"; }
std::string to_string(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::flash: return "flash";
    case AttentionBackend::fused: return "fused";
    case AttentionBackend::unfused: break;
  }
  return "unfused";
}

std::string to_string(RouterScore score) { return score == RouterScore::softmax ? "softmax" : "sigmoid"; }

std::optional<Activation> activation_from_string(std::string_view s) {
  if (s == "swiglu") return Activation::swiglu;
  if (s == "gelu") return Activation::gelu;
  if (s == "squared_relu") return Activation::squared_relu;
  if (s == "geglu") return Activation::geglu;
  if (s == "quick_geglu") return Activation::quick_geglu;
  return std::nullopt;
}

std::optional<Normalization> normalization_from_string(std::string_view s) {
  if (s == "rmsnorm") return Normalization::rmsnorm;
  if (s == "layernorm") return Normalization::layernorm;
  return std::nullopt;
}

std::optional<AttentionBackend> attention_backend_from_string(std::string_view s) {
  if (s == "flash") return AttentionBackend::flash;
  if (s == "fused") return AttentionBackend::fused;
  if (s == "unfused") return AttentionBackend::unfused;
  return std::nullopt;
}

std::optional<RouterScore> router_score_from_string(std::string_view s) {
  if (s == "softmax") return RouterScore::softmax;
  if (s == "sigmoid") return RouterScore::sigmoid;
  return std::nullopt;
}

}  // namespace twin
