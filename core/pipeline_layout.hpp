// A pipeline layout as Megatron-LM states it (--pipeline-model-parallel-layout): which layers each virtual stage
// holds, in virtual-stage order (virtual stage chunk * pp + stage). The string's grammar is Megatron's
// (megatron/core/transformer/pipeline_parallel_layer_layout.py, parse_str_to_list and validate_layer_layout, at
// NVIDIA/Megatron-LM d98e8a64dd): `|` separates virtual stages, `E` the embedding, `t` a transformer (decoder) layer,
// `m` a multi-token-prediction layer, `L` the loss; `x*n` repeats a symbol, `(...)*n` a group (no nesting), commas are
// cosmetic. An empty layout means twin's even split (strategies/sharded_parameters.hpp); Megatron's
// decoder_first/last_pipeline_num_layers are the layouts that shorten or lengthen the first and last stage.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

struct PipelineLayout {
  std::string text;                    // as the user wrote it, what megatron_args.txt passes on; empty: even split
  std::vector<int> decoder_layers;     // `t` per virtual stage
  std::vector<int> mtp_layers;         // `m` per virtual stage
  int embedding_stage = -1, loss_stage = -1;  // the virtual stage holding `E`, `L`

  bool empty() const { return text.empty(); }
  int virtual_stages() const { return static_cast<int>(decoder_layers.size()); }
  bool operator==(const PipelineLayout& other) const { return text == other.text; }
};

// Parses Megatron's string; nullopt and `error` set to what was expected when it is not one. Expansions are
// bounded (at most kMaxPipelineLayoutSymbols symbols) so that a hostile `(t)*99999999` fails, not allocates.
inline constexpr int kMaxPipelineLayoutSymbols = 1 << 16;
std::optional<PipelineLayout> parse_pipeline_layout(std::string_view text, std::string& error);

// Why `layout` cannot split a model of `num_layers` decoder and `mtp_num_layers` MTP layers over `pp` pipeline
// stages of `virtual_stages_per_stage` chunks: the counts Megatron checks (virtual stages, t and m) and twin's rules
// (E in the first virtual stage, every m in the last, no empty virtual stage). The order within a stage (E first, L
// the last symbol, so in the last stage, every m after every t) is parse_pipeline_layout's.
std::optional<std::string> pipeline_layout_reason(const PipelineLayout& layout, int num_layers, int mtp_num_layers,
                                                  int pp, int virtual_stages_per_stage);

// A short name for strategy keys and file names: the decoder layers per virtual stage, run-length coded, and where
// the MTP layers are ("1-2x30-0-1m" for DeepSeek-V3's "Et|(tt|)*30mL").
std::string pipeline_layout_key(const PipelineLayout& layout);

}  // namespace twin
