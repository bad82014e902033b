#include "executor/context_rows.hpp"

#include <array>
#include <stdexcept>

#include <fmt/format.h>

#include "strategies/rank_layout.hpp"

namespace twin::exec {

std::vector<ContextRowRun> context_row_runs(std::int64_t sequences, std::int64_t local_length,
                                            int context_parallel_rank, int context_parallel_size) {
  if (local_length <= 0 || local_length % 2 != 0)
    throw std::invalid_argument(fmt::format("context-parallel rows: {} rows a sequence are not two whole chunks",
                                            local_length));
  if (context_parallel_rank < 0 || context_parallel_rank >= context_parallel_size)
    throw std::invalid_argument(fmt::format("context-parallel rows: rank {} is not one of {} CP ranks",
                                            context_parallel_rank, context_parallel_size));
  const std::int64_t chunk = local_length / 2;
  const std::array<int, 2> chunks = context_chunks_of(context_parallel_rank, context_parallel_size);
  std::vector<ContextRowRun> runs;
  runs.reserve(static_cast<std::size_t>(2 * sequences));
  for (std::int64_t sequence = 0; sequence < sequences; ++sequence)
    for (std::size_t half = 0; half < chunks.size(); ++half)
      runs.push_back({sequence * local_length + static_cast<std::int64_t>(half) * chunk, chunk, sequence,
                      chunks[half] * chunk});
  return runs;
}

}  // namespace twin::exec
