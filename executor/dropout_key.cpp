#include "executor/dropout_key.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/splitmix.hpp"
#include "executor/context_rows.hpp"
#include "strategies/rank_layout.hpp"

namespace twin::exec {

std::uint64_t dropout_subsequence(int step, int layer, OpRole role) {
  if (step < 0) throw std::logic_error(fmt::format("dropout: step {} is negative", step));
  const auto site = [&](std::uint64_t within_layer) {
    if (layer < 0 || layer >= (1 << 30))
      throw std::logic_error(fmt::format("dropout: layer {} of a residual is outside the model", layer));
    return 1 + 2 * static_cast<std::uint64_t>(layer) + within_layer;
  };
  std::uint64_t low = 0;
  if (role == OpRole::attention_residual) {
    low = site(0);
  } else if (role == OpRole::mlp_residual) {
    low = site(1);
  } else if (role != OpRole::embedding) {
    throw std::logic_error("dropout: op role " + to_string(role) + " applies no hidden dropout");
  }
  return static_cast<std::uint64_t>(step) << 32 | low;
}

std::int64_t attention_dropout_seed(std::uint64_t seed, int step, int layer, int micro_batch, std::int64_t first_row,
                                    const RankCoordinates& at, int unit_tp_rank) {
  std::uint64_t h = splitmix64(seed);
  for (const std::int64_t field : {std::int64_t{step}, std::int64_t{layer}, std::int64_t{micro_batch}, first_row,
                                   std::int64_t{at.tp}, std::int64_t{at.cp}, std::int64_t{at.dp}, std::int64_t{at.pp},
                                   std::int64_t{unit_tp_rank}})
    h = splitmix64(h ^ static_cast<std::uint64_t>(field));
  return static_cast<std::int64_t>(h >> 1);  // non-negative: cuDNN reads an int64
}

namespace {
// The runs of all the micro-batch's rows here, before the window.
std::vector<BatchRowRun> all_runs(const MicroBatchRows& m) {
  const std::int64_t first_token = m.first_sequence * m.seq_length;
  if (m.context_parallel_size == 1) return {{0, m.sequences * m.local_length - m.first_row, first_token + m.first_row}};
  if (m.first_row != 0)
    throw std::invalid_argument("dropout rows: a context-parallel micro-batch's rows are two whole chunks a sequence");
  std::vector<BatchRowRun> runs;
  for (const ContextRowRun& run :
       context_row_runs(m.sequences, m.local_length, m.context_parallel_rank, m.context_parallel_size))
    runs.push_back({run.first_row, run.rows, first_token + run.sequence * m.seq_length + run.first_position});
  return runs;
}
}  // namespace

std::vector<BatchRowRun> batch_row_runs(const MicroBatchRows& m) {
  const std::vector<BatchRowRun> runs = all_runs(m);
  const std::int64_t total = runs.empty() ? 0 : runs.back().first_row + runs.back().rows;
  if (m.window_first < 0 || m.window_rows <= 0 || m.window_first + m.window_rows > total)
    throw std::invalid_argument(fmt::format("dropout rows: rows [{}, {}) are not among the micro-batch's {} rows",
                                            m.window_first, m.window_first + m.window_rows, total));
  const std::int64_t lo = m.window_first, hi = m.window_first + m.window_rows;
  std::vector<BatchRowRun> out;
  for (const BatchRowRun& run : runs) {
    const std::int64_t begin = std::max(run.first_row, lo), end = std::min(run.first_row + run.rows, hi);
    if (end > begin) out.push_back({begin - lo, end - begin, run.first_token + (begin - run.first_row)});
  }
  return out;
}

}  // namespace twin::exec
