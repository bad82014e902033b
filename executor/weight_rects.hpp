// A GPU's holding of a weight as rectangles of the full weight, each placed in the GPU's unit buffer: a shard's
// rows are contiguous (its ShardMap's row offset), its columns up to three runs (fused QKV), and a part of the
// unit's flat buffer (a data-parallel shard) cuts a first and a last row short. What hot switching's re-sharding
// (executor/resharding.hpp) and an asymmetric plan's reduction across pipelines (executor/pipeline_reduction.hpp)
// intersect.
#pragma once
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "executor/parameters.hpp"

namespace twin::exec {

struct Rect {
  std::int64_t row = 0, col = 0, rows = 0, cols = 0;  // in the full weight
  std::int64_t first = 0, ld = 0;                      // element (row, col) in the unit buffer; its row length
  auto extent() const { return std::tie(row, col, rows, cols); }
};

// The rectangles of `w` within [begin, end) of its unit's flat buffer.
std::vector<Rect> rects_of(const WeightTensor& w, std::int64_t begin, std::int64_t end);

// The part of the full weight both rectangles cover (placed as `a`), if any.
std::optional<Rect> overlap(const Rect& a, const Rect& b);

// Where element (row, col) of the full weight lies in the unit buffer `r` is placed in.
std::int64_t element_of(const Rect& r, std::int64_t row, std::int64_t col);

// Megatron pads the vocabulary to a multiple of 128 x TP, so a layout of a larger TP size holds padding another
// does not. A vocabulary-sized weight's padding: the embedding table's rows from the model's vocabulary on (and a
// tied table's copy's), the untied output layer's [hidden, vocab] columns; none of another weight (-1).
struct VocabularyPadding {
  std::int64_t row = -1, col = -1;  // the first padding row or column, -1: none
  bool contains(std::int64_t r, std::int64_t c) const { return (row >= 0 && r >= row) || (col >= 0 && c >= col); }
  // The elements of `r` that are not padding: the model's own.
  std::int64_t real_elements(const Rect& r) const;
};
VocabularyPadding vocabulary_padding(const WeightTensor& w, std::int64_t vocabulary);

}  // namespace twin::exec
