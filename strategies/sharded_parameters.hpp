// Parameters one GPU holds, split as the lowering and the memory model need them: per transformer
// layer, per embedding and output layer, dense (reduced over the data group) and expert (reduced over
// the expert-data group). The counts are core's parameter groups (core/model.hpp's LayerParameterGroups and
// EmbeddingAndOutputParameters) divided: TP shards linear weights (and column-parallel biases); norm weights,
// the router and row-parallel biases are replicated; experts are split over EP and each over expert TP (ETP).
#pragma once
#include <cstdint>
#include <vector>

#include "core/model.hpp"
#include "core/strategy.hpp"

namespace twin {

// Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by (128) * tp.
inline constexpr std::int64_t kVocabDivisibleBy = 128;
std::int64_t padded_vocab_size(const ModelConfig& model, int tensor_parallel);

struct RankParameters {
  std::int64_t dense = 0;   // replicated over GroupKind::data (dp*cp ranks)
  std::int64_t expert = 0;  // replicated over GroupKind::expert_data
  std::int64_t total() const { return dense + expert; }
  RankParameters& operator+=(const RankParameters& o) {
    dense += o.dense;
    expert += o.expert;
    return *this;
  }
};

// Each expert's weights split over `expert_tensor_parallel` ranks (Megatron's ETP; no expert biases there).
RankParameters layer_parameters_per_rank(const ModelConfig& model, int layer, int tensor_parallel,
                                         int expert_parallel, int expert_tensor_parallel = 1);
// Word embedding (vocab-parallel) plus learned positions when the model has no RoPE.
std::int64_t embedding_parameters_per_rank(const ModelConfig& model, int tensor_parallel);
// Final norm plus the output projection (absent when tied and the embedding is on the same rank). With MTP, a rank
// without the embedding also keeps a copy of the word embedding for the MTP depths' lookups (Megatron's mtp_process
// stage: LanguageModule.setup_embeddings_and_output_layer, its gradient summed with the first stage's like a tied
// copy's); tied, the output projection is that copy already.
std::int64_t output_parameters_per_rank(const ModelConfig& model, int tensor_parallel, bool holds_embedding);

// Model chunks each pipeline rank holds: virtual_pipeline_model_parallel_size, or 2 under double-strand.
int chunks_per_stage(const Strategy& strategy);
// The virtual stage that chunk `chunk` of pipeline stage `stage` is: chunk * pp + stage. Double-strand
// folds the model (DHeLlam's W-shaped pipeline): chunk 0 is virtual stage `stage` and chunk 1 its mirror
// 2 * pp - 1 - stage, so stage 0 holds the first and the last layers, the embedding and the output layer.
int virtual_stage_of(const Strategy& strategy, int stage, int chunk);

// Virtual stage j holds layers [first_layer_of, first_layer_of + layers_in_virtual_stage).
// Even when num_layers divides over the pp * vpp virtual stages. Otherwise as Llama 3 (and Megatron's
// decoder_first/last_pipeline_num_layers) do: every virtual stage holds ceil(L / n) layers but the last,
// and when two are missing also the first, hold one fewer, which offsets the embedding and loss they carry.
// validity.cpp refuses the split when that is impossible (more than two layers missing). A strategy's
// pipeline_model_parallel_layout, where it has one, says instead how many layers each virtual stage holds.
int layers_in_virtual_stage(const ModelConfig& model, const Strategy& strategy, int virtual_stage);
int first_layer_of(const ModelConfig& model, const Strategy& strategy, int stage, int chunk);
int max_layers_in_virtual_stage(const ModelConfig& model, const Strategy& strategy);
// The MTP depths virtual stage `vs` runs, beside the loss: all of them in the last virtual stage (Megatron's place
// without a layout, and the only one twin lowers for a layout's m), none elsewhere.
int mtp_layers_in_virtual_stage(const ModelConfig& model, const Strategy& strategy, int virtual_stage);
// The transformer layers chunk `chunk` of stage `stage` runs, in order: its decoder layers, then its MTP depths'
// (layer num_layers + d for depth d).
std::vector<int> chunk_layers(const ModelConfig& model, const Strategy& strategy, int stage, int chunk);

// All parameters of pipeline stage `stage` per GPU: its chunks' layers, the embedding on the first
// virtual stage, the output layer on the last (a tied copy of the embedding there when another stage
// holds the embedding).
RankParameters stage_parameters_per_rank(const ModelConfig& model, const Strategy& strategy, int stage);

}  // namespace twin
