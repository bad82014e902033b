// Argument checks, then one cuBLASLt product per non-empty group; an expert with no tokens gets a zero weight
// gradient (and bias gradient) by a memset (cuBLASLt is not asked for k == 0).
#include "gpu/grouped_matmul.hpp"

#include <cstdint>
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

void GroupedMatmul::check(std::span<const GemmGroup> groups, bool transpose_b, const GroupEpilogue& epilogue) const {
  const MatmulEpilogue kind = epilogue.kind;
  if (kind == MatmulEpilogue::bias_grad_of_a || (kind == MatmulEpilogue::bias_grad_of_b && transpose_b))
    throw std::invalid_argument("grouped matmul: a bias gradient is taken of B [k,n] only (not transposed)");
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const GemmGroup& group = groups[g];
    if (group.m < 0 || group.n < 0 || group.k < 0)
      throw std::invalid_argument(fmt::format("grouped matmul: group {} has a negative size ({} x {} x {})", g,
                                              group.m, group.n, group.k));
    if (group.m == 0 || group.n == 0) continue;
    if (!group.c || (group.k > 0 && (!group.a || !group.b)) || (kind != MatmulEpilogue::none && !group.vector))
      throw std::invalid_argument(fmt::format("grouped matmul: group {} ({} x {} x {}) lacks an operand", g, group.m,
                                              group.n, group.k));
  }
}

void GroupedMatmul::run(std::span<const GemmGroup> groups, bool transpose_a, bool transpose_b, bool accumulate,
                        cudaStream_t stream, GroupEpilogue epilogue, kernels::GradType output) {
  check(groups, transpose_b, epilogue);
  if (output == kernels::GradType::f32 && epilogue.kind == MatmulEpilogue::add_bias)
    throw std::invalid_argument("grouped matmul: an fp32 output takes no bias (a weight gradient's run)");
  const std::size_t element = kernels::element_bytes(output);
  for (const GemmGroup& group : groups) {
    if (group.m == 0 || group.n == 0) continue;
    if (group.k == 0) {
      if (!accumulate) TWIN_CUDA_CHECK(cudaMemsetAsync(group.c, 0, group.m * group.n * element, stream));
      if (epilogue.kind == MatmulEpilogue::bias_grad_of_b)  // no rows: the sums are zero
        TWIN_CUDA_CHECK(cudaMemsetAsync(group.vector, 0, group.n * element, stream));
      continue;
    }
    run_group(group, transpose_a, transpose_b, accumulate, stream, epilogue, output);
  }
}

void GroupedMatmul::run_group(const GemmGroup& group, bool transpose_a, bool transpose_b, bool accumulate,
                              cudaStream_t stream, const GroupEpilogue& epilogue, kernels::GradType output) {
  MatmulProblem plain{group.m, group.n, group.k, transpose_a, transpose_b, accumulate};
  plain.f32_output = output == kernels::GradType::f32;
  const kernels::GradRef c(group.c, output), vector(group.vector, output);
  if (epilogue.kind == MatmulEpilogue::none)
    return matmul_.run_into_gradient(plain, group.a, group.b, c, stream, {}, true);
  MatmulProblem fused = plain;
  fused.epilogue = epilogue.kind;
  if (epilogue_vector_aligned(group.vector) && matmul_.supports_ragged(fused))
    return matmul_.run_into_gradient(fused, group.a, group.b, c, stream, vector, true);
  ++unfused_epilogues_;
  matmul_.run_into_gradient(plain, group.a, group.b, c, stream, {}, true);
  if (epilogue.kind == MatmulEpilogue::add_bias)  // bf16 (run refuses a bias with an fp32 output)
    return kernels::bias_add(static_cast<__nv_bfloat16*>(group.c), static_cast<const __nv_bfloat16*>(group.vector),
                             group.m, group.n, stream);
  if (!epilogue.partials) throw std::invalid_argument("grouped matmul: a bias gradient's kernel needs partials");
  kernels::bias_grad(group.b, epilogue.partials, vector, false, group.k, group.n, stream);
}

}  // namespace twin::exec
