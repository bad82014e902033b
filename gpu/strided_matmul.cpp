// Row-major C = A B is column-major C^T = B^T A^T (as gpu/matmul.cpp): cuBLASLt's first operand is our B, its
// second our A, and a row-major [r,c] view with row stride ld is a column-major c x r one with leading dimension ld.
#include "gpu/strided_matmul.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/cublaslt_plan.hpp"

namespace twin::exec {

struct StridedMatmul::Plan : CublasLtPlan {};

namespace {

// A stored operand of `rows` x `cols` (column-major) with its leading dimension, `count` of them `stride` apart.
cublasLtMatrixLayout_t layout(std::int64_t rows, std::int64_t cols, const StridedOperand& operand, int count) {
  cublasLtMatrixLayout_t result = nullptr;
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&result, CUDA_R_16BF, rows, cols, operand.ld));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(result, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(result, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &operand.batch_stride, sizeof(operand.batch_stride)));
  return result;
}

}  // namespace

StridedMatmul::StridedMatmul() : workspace_(kWorkspaceBytes) { TWIN_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

StridedMatmul::~StridedMatmul() {
  plans_.clear();
  cublasLtDestroy(handle_);
}

const StridedMatmul::Plan& StridedMatmul::plan_for(const StridedProblem& p) {
  if (auto found = plans_.find(p); found != plans_.end()) return *found->second;
  if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.count <= 0)
    throw std::invalid_argument(fmt::format("StridedMatmul: an empty problem m={} n={} k={} count={}", p.m, p.n, p.k,
                                            p.count));
  auto plan = std::make_unique<Plan>();
  describe_product(*plan, p.transpose_a, p.transpose_b);
  plan->first = layout(p.transpose_b ? p.k : p.n, p.transpose_b ? p.n : p.k, p.b, p.count);
  plan->second = layout(p.transpose_a ? p.m : p.k, p.transpose_a ? p.k : p.m, p.a, p.count);
  plan->out = layout(p.n, p.m, p.c, p.count);
  plan->beta = p.accumulate ? 1.0f : 0.0f;
  if (!heuristic_algorithm(handle_, *plan, workspace_.bytes(), plan->algo))
    throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for the strided GEMM m={} n={} k={} count={} "
                                         "(transposes {}/{}, ld {}/{}/{})", p.m, p.n, p.k, p.count, p.transpose_a,
                                         p.transpose_b, p.a.ld, p.b.ld, p.c.ld));
  return *plans_.emplace(p, std::move(plan)).first->second;
}

void StridedMatmul::run(const StridedProblem& problem, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
                        __nv_bfloat16* c, cudaStream_t stream) {
  const Plan& plan = plan_for(problem);
  TWIN_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, b, plan.first, a, plan.second, &plan.beta, c,
                                   plan.out, c, plan.out, &plan.algo, workspace_.data(), workspace_.bytes(), stream));
}

}  // namespace twin::exec
