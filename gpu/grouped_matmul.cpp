// Argument checks, then one cuBLASLt product per non-empty group; an expert with no tokens gets a zero weight
// gradient by a memset (cuBLASLt is not asked for k == 0).
#include "gpu/grouped_matmul.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"

namespace twin::exec {

void GroupedMatmul::run(std::span<const GemmGroup> groups, bool transpose_a, bool transpose_b, bool accumulate,
                        cudaStream_t stream) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const GemmGroup& group = groups[g];
    if (group.m < 0 || group.n < 0 || group.k < 0)
      throw std::invalid_argument(fmt::format("grouped matmul: group {} has a negative size ({} x {} x {})", g,
                                              group.m, group.n, group.k));
    if (group.m == 0 || group.n == 0) continue;
    if (!group.c || (group.k > 0 && (!group.a || !group.b)))
      throw std::invalid_argument(fmt::format("grouped matmul: group {} ({} x {} x {}) lacks an operand", g, group.m,
                                              group.n, group.k));
  }
  for (const GemmGroup& group : groups) {
    if (group.m == 0 || group.n == 0) continue;
    if (group.k == 0) {
      if (!accumulate)
        TWIN_CUDA_CHECK(cudaMemsetAsync(group.c, 0, group.m * group.n * sizeof(__nv_bfloat16), stream));
      continue;
    }
    matmul_.run_ragged({group.m, group.n, group.k, transpose_a, transpose_b, accumulate}, group.a, group.b, group.c,
                       stream);
  }
}

}  // namespace twin::exec
