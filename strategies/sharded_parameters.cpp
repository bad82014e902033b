// Per-GPU parameter counts: core's parameter groups (core/model.hpp) divided by TP, EP and expert TP.
#include "strategies/sharded_parameters.hpp"

#include <algorithm>

namespace twin {

std::int64_t padded_vocab_size(const ModelConfig& model, int tensor_parallel) {
  const std::int64_t multiple = kVocabDivisibleBy * tensor_parallel;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

RankParameters layer_parameters_per_rank(const ModelConfig& m, int layer, int tp, int ep, int etp) {
  const LayerParameterGroups g = layer_parameter_groups(m, layer);
  RankParameters p;
  p.dense = g.attention_weights / tp + g.attention_biases / tp + g.mlp_weights / tp + g.mlp_biases / tp +
            g.mlp_weights_shared / tp + g.mtp_projection / tp + g.replicated;
  p.expert = static_cast<std::int64_t>(g.experts / ep) * (g.per_expert / etp);
  return p;
}

std::int64_t embedding_parameters_per_rank(const ModelConfig& m, int tp) {
  const EmbeddingAndOutputParameters p = embedding_and_output_parameters(m, padded_vocab_size(m, tp));
  return p.word_embedding / tp + p.position_embedding;
}

std::int64_t output_parameters_per_rank(const ModelConfig& m, int tp, bool holds_embedding) {
  const EmbeddingAndOutputParameters p = embedding_and_output_parameters(m, padded_vocab_size(m, tp));
  // Tied: the embedding serves as the output projection, or a copy of it does on another stage.
  const std::int64_t output = p.final_norm + (holds_embedding ? p.output_projection : p.word_embedding) / tp;
  const bool mtp_copy = m.mtp_num_layers > 0 && m.untie_embeddings_and_output_weights && !holds_embedding;
  return output + (mtp_copy ? p.word_embedding / tp : 0);
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

int max_layers_in_virtual_stage(const ModelConfig& m, const Strategy& s) {
  const PipelineLayout& layout = s.pipeline_model_parallel_layout;
  if (layout.empty()) return layer_split(m, s).per_stage;
  int most = 0;
  for (int count : layout.decoder_layers) most = std::max(most, count);
  return most;
}

int layers_in_virtual_stage(const ModelConfig& m, const Strategy& s, int vs) {
  if (const PipelineLayout& layout = s.pipeline_model_parallel_layout; !layout.empty())
    return layout.decoder_layers.at(static_cast<std::size_t>(vs));
  const LayerSplit split = layer_split(m, s);
  int count = split.per_stage;
  if (split.missing >= 1 && vs == split.virtual_stages - 1) --count;
  if (split.missing >= 2 && vs == 0) --count;
  return count;
}

int first_layer_of(const ModelConfig& m, const Strategy& s, int stage, int chunk) {
  const int vs = virtual_stage_of(s, stage, chunk);
  if (const PipelineLayout& layout = s.pipeline_model_parallel_layout; !layout.empty()) {
    int first = 0;
    for (int before = 0; before < vs; ++before) first += layout.decoder_layers.at(static_cast<std::size_t>(before));
    return first;
  }
  const LayerSplit split = layer_split(m, s);
  return vs * split.per_stage - (split.missing >= 2 && vs > 0 ? 1 : 0);
}

int mtp_layers_in_virtual_stage(const ModelConfig& m, const Strategy& s, int vs) {
  const int last = s.pipeline_model_parallel_size * chunks_per_stage(s) - 1;
  return vs == last ? m.mtp_num_layers : 0;
}

std::vector<int> chunk_layers(const ModelConfig& m, const Strategy& s, int stage, int chunk) {
  const int vs = virtual_stage_of(s, stage, chunk);
  const int first = first_layer_of(m, s, stage, chunk), count = layers_in_virtual_stage(m, s, vs);
  std::vector<int> layers;
  for (int layer = first; layer < first + count; ++layer) layers.push_back(layer);
  for (int depth = 0; depth < mtp_layers_in_virtual_stage(m, s, vs); ++depth) layers.push_back(m.num_layers + depth);
  return layers;
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
    for (int layer : chunk_layers(m, s, stage, chunk))
      total += layer_parameters_per_rank(m, layer, tp, s.expert_model_parallel_size, s.expert_tensor_parallel_size);
  }
  if (holds_embedding) total.dense += embedding_parameters_per_rank(m, tp);
  if (holds_output) total.dense += output_parameters_per_rank(m, tp, holds_embedding);
  return total;
}

}  // namespace twin
