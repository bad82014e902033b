// Per-GPU parameter counts under TP and EP sharding, from the layer shapes.
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {

std::int64_t norm_parameters(const ModelConfig& m) {
  return m.normalization == Normalization::layernorm ? 2 * m.hidden_size : m.hidden_size;
}

std::int64_t head_dim(const ModelConfig& m) {
  return m.kv_channels > 0 ? m.kv_channels : m.hidden_size / m.num_attention_heads;
}

}  // namespace

std::int64_t padded_vocab_size(const ModelConfig& model, int tensor_parallel) {
  const std::int64_t multiple = kVocabDivisibleBy * tensor_parallel;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

RankParameters layer_parameters_per_rank(const ModelConfig& m, int layer, int tp, int ep) {
  const std::int64_t h = m.hidden_size, d = head_dim(m);
  const std::int64_t qkv = h * (m.num_attention_heads + 2LL * m.num_query_groups) * d;
  const std::int64_t projection = static_cast<std::int64_t>(m.num_attention_heads) * d * h;
  const std::int64_t mlp_matrices = m.activation == Activation::swiglu ? 3 : 2;
  const std::int64_t gated = m.activation == Activation::swiglu ? 2 : 1;
  // Biases: a column-parallel bias is sharded with its weight, a row-parallel one (h) replicated.
  const auto mlp_biases = [&](std::int64_t ffn, int shards) {
    return m.add_bias_linear ? gated * ffn / shards + h : 0;
  };
  RankParameters p;
  p.dense = (qkv + projection) / tp + 2 * norm_parameters(m);
  if (m.add_bias_linear) p.dense += (m.num_attention_heads + 2LL * m.num_query_groups) * d / tp + h;
  if (m.is_moe_layer(layer)) {
    p.dense += h * m.moe.num_experts;  // router, replicated
    const std::int64_t per_expert = mlp_matrices * h * m.moe.ffn_hidden_size + mlp_biases(m.moe.ffn_hidden_size, 1);
    p.expert = static_cast<std::int64_t>(m.moe.num_experts / ep) * per_expert;
  } else {
    p.dense += mlp_matrices * h * m.ffn_hidden_size / tp + mlp_biases(m.ffn_hidden_size, tp);
  }
  return p;
}

std::int64_t embedding_parameters_per_rank(const ModelConfig& m, int tp) {
  std::int64_t p = padded_vocab_size(m, tp) * m.hidden_size / tp;
  if (!m.position_embedding_rope) p += m.max_position_embeddings * m.hidden_size;
  return p;
}

std::int64_t output_parameters_per_rank(const ModelConfig& m, int tp, bool holds_embedding) {
  std::int64_t p = norm_parameters(m);
  if (m.untie_embeddings_and_output_weights || !holds_embedding) p += padded_vocab_size(m, tp) * m.hidden_size / tp;
  return p;
}

namespace {
struct LayerSplit {
  int virtual_stages, per_stage, missing;
};
LayerSplit layer_split(const ModelConfig& m, const Strategy& s) {
  const int n = s.pipeline_model_parallel_size * chunks_per_stage(s);
  const int per = (m.num_layers + n - 1) / n;
  return {n, per, per * n - m.num_layers};
}
}  // namespace

int chunks_per_stage(const Strategy& s) {
  return s.schedule == Schedule::double_strand ? 2 : s.virtual_pipeline_model_parallel_size;
}

int virtual_stage_of(const Strategy& s, int stage, int chunk) {
  const int pp = s.pipeline_model_parallel_size;
  if (s.schedule == Schedule::double_strand) return chunk == 0 ? stage : 2 * pp - 1 - stage;
  return chunk * pp + stage;
}

int max_layers_in_virtual_stage(const ModelConfig& m, const Strategy& s) { return layer_split(m, s).per_stage; }

int layers_in_virtual_stage(const ModelConfig& m, const Strategy& s, int vs) {
  const LayerSplit split = layer_split(m, s);
  int count = split.per_stage;
  if (split.missing >= 1 && vs == split.virtual_stages - 1) --count;
  if (split.missing >= 2 && vs == 0) --count;
  return count;
}

int first_layer_of(const ModelConfig& m, const Strategy& s, int stage, int chunk) {
  const LayerSplit split = layer_split(m, s);
  const int vs = virtual_stage_of(s, stage, chunk);
  return vs * split.per_stage - (split.missing >= 2 && vs > 0 ? 1 : 0);
}

RankParameters stage_parameters_per_rank(const ModelConfig& m, const Strategy& s, int stage) {
  const int tp = s.tensor_model_parallel_size, pp = s.pipeline_model_parallel_size;
  const int chunks = chunks_per_stage(s);
  RankParameters total;
  bool holds_embedding = false, holds_output = false;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int vs = virtual_stage_of(s, stage, chunk);
    holds_embedding |= vs == 0;
    holds_output |= vs == pp * chunks - 1;
    const int first = first_layer_of(m, s, stage, chunk);
    const int count = layers_in_virtual_stage(m, s, vs);
    for (int layer = first; layer < first + count; ++layer)
      total += layer_parameters_per_rank(m, layer, tp, s.expert_model_parallel_size);
  }
  if (holds_embedding) total.dense += embedding_parameters_per_rank(m, tp);
  if (holds_output) total.dense += output_parameters_per_rank(m, tp, holds_embedding);
  return total;
}

}  // namespace twin
