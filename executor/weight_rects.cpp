#include "executor/weight_rects.hpp"

#include <algorithm>

namespace twin::exec {

std::vector<Rect> rects_of(const WeightTensor& w, std::int64_t begin, std::int64_t end) {
  std::vector<Rect> out;
  const std::int64_t ld = w.cols;
  begin = std::max(begin, w.offset) - w.offset;
  end = std::min(end, w.offset + w.elements()) - w.offset;
  if (end <= begin) return out;
  // Local rows [row_begin, row_end), local columns [col_begin, col_end), cut by the shard's column runs.
  const auto add = [&](std::int64_t row_begin, std::int64_t row_end, std::int64_t col_begin, std::int64_t col_end) {
    for (int s = 0; s < w.shard.segments; ++s) {
      const std::int64_t lo = std::max(col_begin, w.shard.local_begin[s]);
      const std::int64_t hi = std::min(col_end, w.shard.local_begin[s] + w.shard.width[s]);
      if (hi <= lo || row_end <= row_begin) continue;
      out.push_back({w.shard.row_offset + row_begin, w.shard.global_begin[s] + lo - w.shard.local_begin[s],
                     row_end - row_begin, hi - lo, w.offset + row_begin * ld + lo, ld});
    }
  };
  const std::int64_t first_row = begin / ld, last_row = (end - 1) / ld;
  if (first_row == last_row) {
    add(first_row, first_row + 1, begin % ld, (end - 1) % ld + 1);
  } else {
    add(first_row, first_row + 1, begin % ld, ld);
    add(first_row + 1, last_row, 0, ld);
    add(last_row, last_row + 1, 0, (end - 1) % ld + 1);
  }
  return out;
}

std::optional<Rect> overlap(const Rect& a, const Rect& b) {
  Rect out;
  out.row = std::max(a.row, b.row);
  out.col = std::max(a.col, b.col);
  out.rows = std::min(a.row + a.rows, b.row + b.rows) - out.row;
  out.cols = std::min(a.col + a.cols, b.col + b.cols) - out.col;
  if (out.rows <= 0 || out.cols <= 0) return std::nullopt;
  return out;
}

std::int64_t element_of(const Rect& r, std::int64_t row, std::int64_t col) {
  return r.first + (row - r.row) * r.ld + (col - r.col);
}

std::int64_t VocabularyPadding::real_elements(const Rect& r) const {
  const auto below = [](std::int64_t first, std::int64_t count, std::int64_t limit) {
    return limit < 0 ? count : std::clamp<std::int64_t>(limit - first, 0, count);
  };
  return below(r.row, r.rows, row) * below(r.col, r.cols, col);
}

VocabularyPadding vocabulary_padding(const WeightTensor& w, std::int64_t vocabulary) {
  VocabularyPadding out;
  if (w.role == OpRole::embedding && w.part == WeightPart::weight) out.row = vocabulary;
  if (w.role == OpRole::output_projection) (w.embedding_copy ? out.row : out.col) = vocabulary;
  return out;
}

}  // namespace twin::exec
