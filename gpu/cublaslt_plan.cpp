#include "gpu/cublaslt_plan.hpp"

#include "gpu/checks.hpp"

namespace twin::exec {

void describe_product(CublasLtPlan& plan, bool transpose_a, bool transpose_b) {
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // our B
  const cublasOperation_t op_second = transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // our A
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  TWIN_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
}

bool heuristic_algorithm(cublasLtHandle_t handle, const CublasLtPlan& plan, std::size_t workspace_bytes,
                         cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulPreference_t preference = nullptr;
  TWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const cublasStatus_t set = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes, sizeof(workspace_bytes));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status =
      set != CUBLAS_STATUS_SUCCESS ? set
                                   : cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.first, plan.second, plan.out,
                                                                    plan.out, preference, 1, &heuristic, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;  // no kernel for this layout (or epilogue) at all
  TWIN_CUBLAS_CHECK(status);
  if (found == 0) return false;
  algo = heuristic.algo;
  return true;
}

}  // namespace twin::exec
