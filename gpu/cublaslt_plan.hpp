// What the bf16 and FP8 GEMMs (gpu/matmul.hpp, gpu/fp8_matmul.hpp) keep per problem: cuBLASLt's descriptors of the
// product and its three matrices, destroyed with it, the algorithm and beta; and the heuristic's first algorithm for
// such a plan within a workspace.
#pragma once
#include <cstddef>

#include <cublasLt.h>

namespace twin::exec {

struct CublasLtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;  // cuBLASLt's A, B, and C = D
  cublasLtMatmulAlgo_t algo{};
  float beta = 0.0f;
  CublasLtPlan() = default;
  CublasLtPlan(const CublasLtPlan&) = delete;
  CublasLtPlan& operator=(const CublasLtPlan&) = delete;
  ~CublasLtPlan() {
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// The product's descriptor (fp32 compute and scale) for our row-major C = op(A) op(B): cuBLASLt's column-major D is our
// C transposed, so its A is our B and its B our A, each transposed as ours is.
void describe_product(CublasLtPlan& plan, bool transpose_a, bool transpose_b);

// cublasLtMatmulAlgoGetHeuristic's first algorithm for `plan` (C and D alike) using at most `workspace_bytes`;
// false when it has none or cuBLASLt does not support the plan at all (another failing call throws).
bool heuristic_algorithm(cublasLtHandle_t handle, const CublasLtPlan& plan, std::size_t workspace_bytes,
                         cublasLtMatmulAlgo_t& algo);

}  // namespace twin::exec
