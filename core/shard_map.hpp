// Where a rank's shard of a weight lies in the full weight: a plain value that the executor's parameter
// layout computes on the CPU and the initialisation kernel reads on the GPU (so C++17, for nvcc).
#pragma once
#include <cstdint>

namespace twin {

// The full weight is [global_rows, global_cols]: local row r is global row row_offset + r; local columns
// come in up to three segments (fused QKV: q | k | v), each a run of `width` columns starting at
// local_begin that maps to global columns from global_begin.
struct ShardMap {
  std::int64_t local_rows = 0, local_cols = 0;
  std::int64_t global_cols = 0, row_offset = 0;
  int segments = 1;
  std::int64_t local_begin[3] = {0, 0, 0}, global_begin[3] = {0, 0, 0}, width[3] = {0, 0, 0};
};

}  // namespace twin
