// Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's first operand is our B, its second our A,
// and a row-major [r,c] matrix is a column-major c x r one with leading dimension c.
#include "executor/matmul.hpp"

#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "calibrate/gpu/checks.hpp"

namespace twin::exec {

struct Matmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  float beta = 0.0f;
  ~Plan() {
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Matmul::Matmul() : workspace_(kWorkspaceBytes) { TWIN_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

Matmul::~Matmul() {
  for (auto& [problem, plan] : plans_) delete plan;
  cublasLtDestroy(handle_);
}

const Matmul::Plan& Matmul::plan_for(const MatmulProblem& p) {
  if (auto found = plans_.find(p); found != plans_.end()) return *found->second;
  auto plan = std::make_unique<Plan>();
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // our B
  const cublasOperation_t op_second = p.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // our A
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, CUDA_R_16BF, p.transpose_b ? p.k : p.n,
                                               p.transpose_b ? p.n : p.k, p.transpose_b ? p.k : p.n));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, CUDA_R_16BF, p.transpose_a ? p.m : p.k,
                                               p.transpose_a ? p.k : p.m, p.transpose_a ? p.m : p.k));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->out, CUDA_R_16BF, p.n, p.m, p.n));
  plan->beta = p.accumulate ? 1.0f : 0.0f;

  cublasLtMatmulPreference_t preference = nullptr;
  TWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t workspace_bytes = workspace_.bytes();
  TWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->first, plan->second,
                                                               plan->out, plan->out, preference, 1, &heuristic, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  TWIN_CUBLAS_CHECK(status);
  if (found == 0)
    throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for GEMM m={} n={} k={} (transposes {}/{})", p.m,
                                         p.n, p.k, p.transpose_a, p.transpose_b));
  plan->algo = heuristic.algo;
  return *plans_.emplace(p, plan.release()).first->second;
}

void Matmul::run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                 cudaStream_t stream) {
  const Plan& plan = plan_for(problem);
  const float alpha = 1.0f;
  TWIN_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, b, plan.first, a, plan.second, &plan.beta, c, plan.out,
                                   c, plan.out, &plan.algo, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace twin::exec
