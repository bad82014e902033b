// Where a rank's shard of a weight lies in the full weight: a plain value that the executor's parameter
// layout computes on the CPU and the initialisation kernel reads on the GPU (so C++17, for nvcc).
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define TWIN_HOST_DEVICE __host__ __device__
#else
#define TWIN_HOST_DEVICE
#endif

namespace twin {

// The full weight is [global_rows, global_cols]: local row r is global row row_offset + r; local columns
// come in up to three segments (fused QKV: q | k | v), each a run of `width` columns starting at
// local_begin that maps to global columns from global_begin.
struct ShardMap {
  std::int64_t local_rows = 0, local_cols = 0;
  std::int64_t global_rows = 0, global_cols = 0, row_offset = 0;
  int segments = 1;
  std::int64_t local_begin[3] = {0, 0, 0}, global_begin[3] = {0, 0, 0}, width[3] = {0, 0, 0};
  // The element index that seeds a weight's initialisation counts down the columns first (the output layer's
  // [hidden, vocabulary]: Megatron pads the vocabulary to a multiple of 128 x TP, so counted along rows every
  // element's index would move with the TP size, and pipelines of different TP sizes would start apart).
  bool column_major_seed = false;
};

// The global column of local column `c`.
TWIN_HOST_DEVICE inline std::int64_t global_column(const ShardMap& map, std::int64_t c) {
  for (int s = 0; s < map.segments; ++s)
    if (c >= map.local_begin[s] && c < map.local_begin[s] + map.width[s]) return map.global_begin[s] + (c - map.local_begin[s]);
  return c;
}

// The index of local element (r, c) in the full weight that seeds its initialisation: every split of the weight
// seeds each element alike.
TWIN_HOST_DEVICE inline std::int64_t seed_index(const ShardMap& map, std::int64_t r, std::int64_t c) {
  const std::int64_t row = map.row_offset + r, col = global_column(map, c);
  return map.column_major_seed ? col * map.global_rows + row : row * map.global_cols + col;
}

}  // namespace twin
