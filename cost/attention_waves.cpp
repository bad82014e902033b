// The tiles of one (batch x head) pair are the same for every pair, so they are computed once and handed out
// pair after pair. Past kExactTiles tiles the hand-out is summed instead of simulated: the last wave's unevenness is
// then well under a percent of the whole.
#include "cost/attention_waves.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <stdexcept>

#include "cost/kernel_predictor.hpp"
#include "cost/shape_space.hpp"

namespace twin {
namespace {

constexpr std::int64_t kExactTiles = std::int64_t{1} << 20;

struct KeySpan {
  std::int64_t lo = 0, hi = 0;  // keys [lo, hi)
};

// The keys query rows [first, last] see: all without causality; with it each row the keys up to its position
// (the queries are the last seq_q of seq_kv positions), with a window only the last `window` of those.
KeySpan keys_seen(const AttentionShape& a, std::int64_t first, std::int64_t last) {
  if (!a.causal) return {0, a.seq_kv};
  const std::int64_t offset = a.seq_kv - a.seq_q;
  const std::int64_t hi = std::clamp<std::int64_t>(last + offset + 1, 0, a.seq_kv);
  const std::int64_t lo = a.window > 0 ? std::clamp<std::int64_t>(first + offset - a.window + 1, 0, hi) : 0;
  return {lo, hi};
}

std::int64_t blocks_between(const KeySpan& s, std::int64_t rows) {
  return s.hi <= s.lo ? 0 : (s.hi + rows - 1) / rows - s.lo / rows;
}

// Each query tile's key span, in tile order.
std::vector<KeySpan> query_tile_spans(const AttentionShape& a, std::int64_t rows) {
  std::vector<KeySpan> spans;
  for (std::int64_t first = 0; first < a.seq_q; first += rows)
    spans.push_back(keys_seen(a, first, std::min(first + rows, a.seq_q) - 1));
  return spans;
}

// One pair's tiles in launch order, each its steps: forward a query tile's key blocks, backward a key tile's query
// tiles (those whose keys reach into it), plus the fixed cost.
std::vector<double> pair_tiles(const AttentionShape& a, bool backward, const AttentionTiling& t) {
  const std::vector<KeySpan> spans = query_tile_spans(a, t.tile_rows);
  std::vector<double> steps;
  if (!backward) {
    for (const KeySpan& s : spans) steps.push_back(double(blocks_between(s, t.tile_rows)) + t.tile_fixed_blocks);
    return steps;
  }
  for (std::int64_t key = 0; key < a.seq_kv; key += t.tile_rows) {
    const std::int64_t end = std::min(key + t.tile_rows, a.seq_kv);
    const auto seen = std::count_if(spans.begin(), spans.end(), [&](const KeySpan& s) { return s.lo < end && s.hi > key; });
    steps.push_back(double(seen) + t.tile_fixed_blocks);
  }
  return steps;
}

// The last slot's finish when `pairs` copies of `tiles` go, in order, each to the first free of `slots`.
double makespan(const std::vector<double>& tiles, std::int64_t pairs, std::int64_t slots) {
  if (tiles.empty() || pairs <= 0) return 0;
  const std::int64_t count = pairs * static_cast<std::int64_t>(tiles.size());
  const double longest = *std::max_element(tiles.begin(), tiles.end());
  if (count <= slots) return longest;
  if (count > kExactTiles) {
    double sum = 0;
    for (double d : tiles) sum += d;
    return sum * double(pairs) / double(slots) + longest;
  }
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (std::int64_t s = 0; s < slots; ++s) free_at.push(0.0);
  double last = 0;
  for (std::int64_t p = 0; p < pairs; ++p)
    for (double d : tiles) {
      const double end = free_at.top() + d;
      free_at.pop();
      free_at.push(end);
      last = std::max(last, end);
    }
  return last;
}

bool comparable_measured(const std::vector<MeasuredKernelShape>& measured, const Op& op) {
  return std::any_of(measured.begin(), measured.end(),
                     [&](const MeasuredKernelShape& m) { return squared_octave_distance(m.op, op).has_value(); });
}

}  // namespace

std::int64_t kernel_head_dim(std::int64_t head_dim) {
  if (head_dim > 192 && head_dim <= 256) return 256;
  return (head_dim + kHeadDimStep - 1) / kHeadDimStep * kHeadDimStep;
}

double attention_wave_steps(const AttentionShape& a, bool backward, int sm_count, const AttentionTiling& tiling) {
  if (sm_count <= 0 || tiling.tile_rows <= 0 || tiling.tiles_per_sm <= 0)
    throw std::invalid_argument("attention_wave_steps: an SM count and a tiling of positive sizes");
  if (a.batch <= 0 || a.heads <= 0 || a.seq_q <= 0 || a.seq_kv <= 0 || a.head_dim <= 0) return 0;
  const std::int64_t slots = std::int64_t{sm_count} * tiling.tiles_per_sm;
  std::int64_t pairs = a.batch * a.heads;
  AttentionShape run = a;
  if (a.packed && a.seq_kv < a.seq_q) {
    // Packed rows (varlen: sequences attending within themselves; seq_kv is their causal work as keys per query,
    // core/op.hpp) run as seq_q / seq_kv causal sequences of seq_kv each.
    pairs = std::max<std::int64_t>(1, std::llround(double(pairs) * double(a.seq_q) / double(a.seq_kv)));
    run.seq_q = a.seq_kv;
    run.causal = true;
  }
  return makespan(pair_tiles(run, backward, tiling), pairs, slots) * double(kernel_head_dim(a.head_dim));
}

double predict_attention_time_ns(const std::vector<MeasuredKernelShape>& measured, const Op& op, int sm_count,
                                 const std::function<double(const Op&)>& curve_ns, const AttentionTiling& tiling) {
  if (sm_count <= 0) return predict_kernel_time_ns(measured, op, curve_ns);
  const auto steps = [&](const Op& other) {
    return attention_wave_steps(other.attention, other.kind == OpKind::attention_backward, sm_count, tiling);
  };
  if (comparable_measured(measured, op)) return predict_kernel_time_ns(measured, op, steps);
  // None of the op's own variant measured. A cap's tanh and the sinks' pass are left unpriced (the kernel without
  // them); a window skips whole tiles, so a windowed kernel runs the tiles it keeps at the pace of the kernel without
  // the window: its steps at the ratio interpolated among those measured shapes. On one H200 a 128-key window of
  // 8,192 ran 0.155 of the causal kernel's time forward, 0.16 backward, its steps 0.153 of theirs, where the
  // efficiency curve over its kept scores priced 0.04 (docs/SIMULATOR.md "Sliding windows").
  Op plain = op;
  for (std::optional<Op> next = without_added_pass(plain); next; next = without_added_pass(plain)) {
    plain = *next;
    if (comparable_measured(measured, plain)) return predict_kernel_time_ns(measured, plain, steps);
  }
  Op whole = plain;
  whole.attention.window = 0;
  const double whole_steps = steps(whole);
  if (op.attention.window == 0 || whole_steps <= 0) return predict_kernel_time_ns(measured, op, curve_ns);
  const double kept = steps(op) / whole_steps;
  if (comparable_measured(measured, whole)) return predict_kernel_time_ns(measured, whole, steps) * kept;
  return predict_kernel_time_ns(measured, whole, curve_ns) * kept;  // the curve's pace for the whole kernel
}

}  // namespace twin
