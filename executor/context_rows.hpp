// A GPU's rows of a micro-batch under context parallelism, as runs of its sequences' positions: the one walk that
// RoPE's and learned positions' runs (executor/gpu/dense_block_attention.cpp) and hidden dropout's batch tokens
// (executor/dropout_key.cpp) both take. Pure CPU code (tests/executor/context_rows_test.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace twin::exec {

// Rows [first_row, first_row + rows) of the GPU's tensor are positions [first_position, first_position + rows) of
// the micro-batch's sequence `sequence` (0 its first).
struct ContextRowRun {
  std::int64_t first_row = 0, rows = 0, sequence = 0, first_position = 0;
  bool operator==(const ContextRowRun&) const = default;
};

// The rows of `sequences` sequences, local_length rows each on this GPU, one sequence after the other, each the two
// chunks of 2 x context_parallel_size that Megatron's load-balanced split gives the CP rank (chunk r, then chunk
// 2cp-1-r: strategies/rank_layout.hpp context_chunks_of), each chunk local_length / 2 positions of its sequence.
// In row order, two runs a sequence. Throws std::invalid_argument where local_length is not two whole chunks (odd or
// not positive), or the rank is not one of the context_parallel_size ranks.
std::vector<ContextRowRun> context_row_runs(std::int64_t sequences, std::int64_t local_length,
                                            int context_parallel_rank, int context_parallel_size);

}  // namespace twin::exec
