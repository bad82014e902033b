// Megatron's layout string read in its two expansion passes (groups, then single symbols), then split into virtual
// stages; the rules it must meet are Megatron's validate_layer_layout plus what twin's lowering places.
#include "core/pipeline_layout.hpp"

#include <cctype>
#include <cstdint>

#include <fmt/format.h>

namespace twin {
namespace {

// The repeat count after `*` at `at` (s[at] == '*'), and where it ends; nullopt when no digits follow.
std::optional<std::pair<std::int64_t, std::size_t>> repeat_after(std::string_view s, std::size_t at) {
  if (at >= s.size() || s[at] != '*') return std::nullopt;
  std::size_t end = at + 1;
  std::int64_t n = 0;
  while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) {
    n = std::min<std::int64_t>(n * 10 + (s[end] - '0'), std::int64_t{1} << 40);
    ++end;
  }
  if (end == at + 1) return std::nullopt;
  return std::pair{n, end};
}

bool append_repeated(std::string& out, std::string_view piece, std::int64_t times) {
  if (static_cast<std::int64_t>(out.size()) + static_cast<std::int64_t>(piece.size()) * times >
      kMaxPipelineLayoutSymbols)
    return false;
  for (std::int64_t i = 0; i < times; ++i) out.append(piece);
  return true;
}

// One pass: `(...)*n` (groups; the group ends at the first `)`) or `x*n` (any single character) expanded.
std::optional<std::string> expand(std::string_view s, bool groups) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (groups && s[i] == '(') {
      const std::size_t close = s.find(')', i + 1);
      if (close != std::string_view::npos && close > i + 1)
        if (const auto repeat = repeat_after(s, close + 1)) {
          if (!append_repeated(out, s.substr(i + 1, close - i - 1), repeat->first)) return std::nullopt;
          i = repeat->second;
          continue;
        }
    }
    if (!groups)
      if (const auto repeat = repeat_after(s, i + 1)) {
        if (!append_repeated(out, s.substr(i, 1), repeat->first)) return std::nullopt;
        i = repeat->second;
        continue;
      }
    if (!append_repeated(out, s.substr(i, 1), 1)) return std::nullopt;
    ++i;
  }
  return out;
}

}  // namespace

std::optional<PipelineLayout> parse_pipeline_layout(std::string_view text, std::string& error) {
  std::string plain;
  for (char c : text)
    if (c != ',') plain.push_back(c);
  std::optional<std::string> expanded = expand(plain, true);
  if (expanded) expanded = expand(*expanded, false);
  if (!expanded) {
    error = fmt::format("a layout of at most {} symbols once its repeats are expanded", kMaxPipelineLayoutSymbols);
    return std::nullopt;
  }
  PipelineLayout layout;
  layout.text = std::string(text);
  layout.decoder_layers.push_back(0);
  layout.mtp_layers.push_back(0);
  // Megatron's order (PipelineParallelLayerLayout.validate_layer_layout): E first in its stage, L the last symbol,
  // every m after the last t.
  bool seen_mtp = false;
  for (char c : *expanded) {
    const int vs = layout.virtual_stages() - 1;
    if (layout.loss_stage >= 0)
      return error = "a layout whose loss L is its last symbol (nothing after L)", std::nullopt;
    switch (c) {
      case '|': layout.decoder_layers.push_back(0), layout.mtp_layers.push_back(0); break;
      case 't':
        if (seen_mtp) return error = "a layout whose MTP layers m follow every transformer layer t", std::nullopt;
        ++layout.decoder_layers.back();
        break;
      case 'm': seen_mtp = true, ++layout.mtp_layers.back(); break;
      case 'E':
        if (layout.embedding_stage >= 0) return error = "a layout with one embedding E", std::nullopt;
        if (layout.decoder_layers.back() + layout.mtp_layers.back() > 0)
          return error = "a layout whose embedding E comes first in its virtual stage", std::nullopt;
        layout.embedding_stage = vs;
        break;
      case 'L':
        layout.loss_stage = vs;
        break;
      default:
        error = fmt::format("a layout of E, t, m, L, '|', commas, x*n and (...)*n (Megatron-LM's "
                            "--pipeline-model-parallel-layout), not '{}' in \"{}\" once expanded",
                            c, expanded->size() > 200 ? expanded->substr(0, 200) + "..." : *expanded);
        return std::nullopt;
    }
  }
  if (layout.embedding_stage < 0 || layout.loss_stage < 0) {
    error = "a layout with an embedding E and a loss L";
    return std::nullopt;
  }
  return layout;
}

namespace {
int count(const std::vector<int>& per_stage) {
  int total = 0;
  for (int n : per_stage) total += n;
  return total;
}
}  // namespace

std::optional<std::string> pipeline_layout_reason(const PipelineLayout& layout, int num_layers, int mtp_num_layers,
                                                  int pp, int virtual_stages_per_stage) {
  const int stages = layout.virtual_stages();
  if (stages != pp * virtual_stages_per_stage)
    return fmt::format("pipeline_model_parallel_layout has {} virtual stages, not pipeline_model_parallel_size*"
                       "virtual_pipeline_model_parallel_size {}",
                       stages, pp * virtual_stages_per_stage);
  if (count(layout.decoder_layers) != num_layers)
    return fmt::format("pipeline_model_parallel_layout places {} transformer layers t, not num_layers {}",
                       count(layout.decoder_layers), num_layers);
  if (count(layout.mtp_layers) != mtp_num_layers)
    return fmt::format("pipeline_model_parallel_layout places {} MTP layers m, not mtp_num_layers {}",
                       count(layout.mtp_layers), mtp_num_layers);
  if (layout.embedding_stage != 0)
    return fmt::format("pipeline_model_parallel_layout puts the embedding E in virtual stage {}: twin places it "
                       "in the first",
                       layout.embedding_stage);
  for (int vs = 0; vs < stages; ++vs) {
    if (layout.mtp_layers[vs] > 0 && vs != stages - 1)
      return fmt::format("pipeline_model_parallel_layout puts MTP layers m in virtual stage {}: twin lowers them "
                         "beside the loss L only (Megatron's standalone MTP stage is not modelled)",
                         vs);
    if (layout.decoder_layers[vs] + layout.mtp_layers[vs] == 0 && vs != 0 && vs != stages - 1)
      return fmt::format("pipeline_model_parallel_layout leaves virtual stage {} empty: twin lowers no empty "
                         "virtual stage",
                         vs);
  }
  return std::nullopt;
}

std::string pipeline_layout_key(const PipelineLayout& layout) {
  std::string key;
  const std::vector<int>& t = layout.decoder_layers;
  for (std::size_t i = 0; i < t.size();) {
    std::size_t run = i;
    while (run < t.size() && t[run] == t[i]) ++run;
    key += fmt::format("{}{}{}", key.empty() ? "" : "-", t[i], run - i > 1 ? fmt::format("x{}", run - i) : "");
    i = run;
  }
  if (const int mtp = count(layout.mtp_layers); mtp > 0) key += fmt::format("-{}m", mtp);
  return key;
}

}  // namespace twin
