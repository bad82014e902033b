// A list of GEMM shapes in JSON, for `twin calibrate --check PROFILE --check-gemms FILE`: a user checks the
// profile's prediction of the shapes their own model runs, not only the built-in off-grid set.
#pragma once
#include <string>
#include <vector>

#include "calibrate/gemm_grid.hpp"

namespace twin {

// [{"m": 4096, "n": 4096, "k": 1376, "count": 1, "transpose_a": false, "transpose_b": false,
//   "origin": "llama2-7b fc2 forward, TP 8"}, ...]: m, n, k required; count 1, no transposes and an
// origin of "FILE[i]" by default. Throws InputError naming the file, the JSON path and what was expected.
std::vector<ModelGemm> read_gemm_shapes_file(const std::string& path);

}  // namespace twin
