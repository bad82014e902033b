// Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's first operand is our B, its second our A,
// and a row-major [r,c] matrix is a column-major c x r one with leading dimension c.
#include "gpu/matmul.hpp"

#include <algorithm>
#include <bit>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/cublaslt_plan.hpp"

namespace twin::exec {

struct Matmul::Plan : CublasLtPlan {};

namespace {

// A stored operand: `rows` x `cols` column-major with leading dimension `ld`, `count` of them back to back.
cublasLtMatrixLayout_t layout(std::int64_t rows, std::int64_t cols, std::int64_t ld, int count,
                              cudaDataType_t type = CUDA_R_16BF) {
  cublasLtMatrixLayout_t result = nullptr;
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&result, type, rows, cols, ld));
  if (count > 1) {
    const std::int64_t stride = rows * cols;
    TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(result, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(result, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                       sizeof(stride)));
  }
  return result;
}

// Ours to cuBLASLt's: its D is our C transposed, so our n is its rows and our m its columns; its A is our B
// (BGRADA reduces it, giving our n) and its B our A (BGRADB, our m).
cublasLtEpilogue_t cublaslt_epilogue(MatmulEpilogue epilogue) {
  switch (epilogue) {
    case MatmulEpilogue::none: return CUBLASLT_EPILOGUE_DEFAULT;
    case MatmulEpilogue::add_bias: return CUBLASLT_EPILOGUE_BIAS;
    case MatmulEpilogue::bias_grad_of_a: return CUBLASLT_EPILOGUE_BGRADB;
    case MatmulEpilogue::bias_grad_of_b: return CUBLASLT_EPILOGUE_BGRADA;
  }
  throw std::logic_error("Matmul: unknown epilogue");
}

}  // namespace

Matmul::Matmul(std::size_t workspace_bytes) : workspace_(workspace_bytes) { TWIN_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

Matmul::~Matmul() {
  plans_.clear();
  cublasLtDestroy(handle_);
}

std::unique_ptr<Matmul::Plan> Matmul::make_plan(const MatmulProblem& p) {
  auto plan = std::make_unique<Plan>();
  describe_product(*plan, p.transpose_a, p.transpose_b);
  // Stored (column-major) shapes: B^T is n x k (ld n), or k x n (ld k) when B is stored [n,k].
  plan->first = layout(p.transpose_b ? p.k : p.n, p.transpose_b ? p.n : p.k, p.transpose_b ? p.k : p.n, p.count);
  plan->second = layout(p.transpose_a ? p.m : p.k, p.transpose_a ? p.k : p.m, p.transpose_a ? p.m : p.k, p.count);
  const cudaDataType_t out_type = p.f32_output ? CUDA_R_32F : CUDA_R_16BF;
  plan->out = layout(p.n, p.m, p.n, p.count, out_type);
  plan->beta = p.accumulate ? 1.0f : 0.0f;
  if (p.epilogue != MatmulEpilogue::none) {
    const cublasLtEpilogue_t epilogue = cublaslt_epilogue(p.epilogue);
    const cudaDataType_t vector_type = out_type;
    TWIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vector_type,
                                                     sizeof(vector_type)));
  }
  return plan;
}

cublasLtMatmulAlgo_t Matmul::heuristic_algo(const Plan& plan, const MatmulProblem& p) {
  cublasLtMatmulAlgo_t algo{};
  ++heuristic_queries_;
  if (!heuristic_algorithm(handle_, plan, workspace_.bytes(), algo))
    throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for GEMM m={} n={} k={} (transposes {}/{})", p.m,
                                         p.n, p.k, p.transpose_a, p.transpose_b));
  return algo;
}

const Matmul::Plan* Matmul::find_plan(const MatmulProblem& p) {
  if (auto found = plans_.find(p); found != plans_.end()) return found->second.get();
  std::unique_ptr<Plan> plan = make_plan(p);
  ++heuristic_queries_;
  if (!heuristic_algorithm(handle_, *plan, workspace_.bytes(), plan->algo)) plan.reset();
  return plans_.emplace(p, std::move(plan)).first->second.get();
}

const Matmul::Plan& Matmul::plan_for(const MatmulProblem& p) {
  if (const Plan* plan = find_plan(p)) return *plan;
  throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for GEMM m={} n={} k={} (transposes {}/{}, "
                                       "epilogue {})", p.m, p.n, p.k, p.transpose_a, p.transpose_b,
                                       static_cast<int>(p.epilogue)));
}

bool Matmul::supports(const MatmulProblem& problem) { return find_plan(problem) != nullptr; }

void Matmul::launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* a,
                    const __nv_bfloat16* b, void* c, const void* addend, void* vector, cudaStream_t stream) {
  const float alpha = 1.0f;
  // The vector's address is the descriptor's, set for this call (a plan serves every call of its problem).
  if (vector != nullptr)
    TWIN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector, sizeof(vector)));
  // C and D share one layout, so the algorithm the heuristic chose for C == D serves C != D as well.
  const void* source = addend != nullptr ? addend : c;
  TWIN_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, b, plan.first, a, plan.second, &plan.beta, source,
                                   plan.out, c, plan.out, &algo, workspace_.data(), workspace_.bytes(), stream));
}

void Matmul::check_call(const MatmulProblem& problem, bool has_addend, bool has_vector, bool f32_output) const {
  if (has_addend && !problem.accumulate)
    throw std::logic_error("Matmul::run: an addend needs a problem that accumulates (beta 1)");
  if (has_vector != (problem.epilogue != MatmulEpilogue::none))
    throw std::logic_error("Matmul::run: a vector exactly when the problem has an epilogue (bias or its gradient)");
  if (f32_output != problem.f32_output)
    throw std::logic_error("Matmul::run: an fp32 output exactly when the problem says f32_output");
}

void Matmul::run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                 cudaStream_t stream, const __nv_bfloat16* addend, __nv_bfloat16* vector) {
  run_checked(problem, false, a, b, {c, addend, vector, false}, stream);
}

void Matmul::run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, float* c,
                 cudaStream_t stream, float* vector) {
  run_checked(problem, false, a, b, {c, nullptr, vector, true}, stream);
}

void Matmul::run_checked(const MatmulProblem& problem, bool ragged, const __nv_bfloat16* a, const __nv_bfloat16* b,
                         const Output& out, cudaStream_t stream) {
  check_call(problem, out.addend != nullptr, out.vector != nullptr, out.f32);
  const Plan& plan = ragged ? ragged_plan_for(problem) : plan_for(problem);
  launch(plan, plan.algo, a, b, out.c, out.addend, out.vector, stream);
}

const Matmul::Plan* Matmul::find_ragged_plan(const MatmulProblem& problem) {
  if (auto exact = plans_.find(problem); exact != plans_.end()) return exact->second.get();
  // Eight buckets per octave: a size takes the algorithm of at most 1/8 above it (a power-of-two bucket gave a
  // 1,055-row expert the algorithm of 2,048 rows).
  const auto bucket_of = [](std::int64_t size) {
    const auto step = std::max<std::int64_t>(
        8, static_cast<std::int64_t>(std::bit_floor(static_cast<std::uint64_t>(std::max<std::int64_t>(size, 1)))) / 8);
    return std::max<std::int64_t>(64, (size + step - 1) / step * step);
  };
  MatmulProblem bucket = problem;
  bucket.m = bucket_of(problem.m);
  bucket.k = bucket_of(problem.k);
  auto chosen = bucket_algos_.find(bucket);
  if (chosen == bucket_algos_.end()) {
    std::optional<cublasLtMatmulAlgo_t> algo(std::in_place);
    ++heuristic_queries_;
    if (!heuristic_algorithm(handle_, *make_plan(bucket), workspace_.bytes(), *algo)) algo.reset();
    chosen = bucket_algos_.emplace(bucket, algo).first;
  }
  std::unique_ptr<Plan> plan = make_plan(problem);
  bool fits = false;
  if (chosen->second) {
    cublasLtMatmulHeuristicResult_t check{};
    const cublasStatus_t status = cublasLtMatmulAlgoCheck(handle_, plan->desc, plan->first, plan->second, plan->out,
                                                          plan->out, &*chosen->second, &check);
    fits = status == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= workspace_.bytes();
  }
  if (fits) {
    plan->algo = *chosen->second;
  } else {
    ++heuristic_queries_;
    if (!heuristic_algorithm(handle_, *plan, workspace_.bytes(), plan->algo)) plan.reset();
  }
  return plans_.emplace(problem, std::move(plan)).first->second.get();
}

const Matmul::Plan& Matmul::ragged_plan_for(const MatmulProblem& problem) {
  const Plan* plan = find_ragged_plan(problem);
  if (plan == nullptr)
    throw std::runtime_error(fmt::format("cuBLASLt has no algorithm for GEMM m={} n={} k={} (transposes {}/{}, "
                                         "epilogue {})", problem.m, problem.n, problem.k, problem.transpose_a,
                                         problem.transpose_b, static_cast<int>(problem.epilogue)));
  return *plan;
}

void Matmul::run_ragged(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b,
                        __nv_bfloat16* c, cudaStream_t stream, __nv_bfloat16* vector) {
  run_checked(problem, true, a, b, {c, nullptr, vector, false}, stream);
}

void Matmul::run_ragged(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, float* c,
                        cudaStream_t stream, float* vector) {
  run_checked(problem, true, a, b, {c, nullptr, vector, true}, stream);
}

void Matmul::run_into_gradient(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b,
                               kernels::GradRef c, cudaStream_t stream, kernels::GradRef vector, bool ragged) {
  if (vector && vector.type != c.type) throw std::logic_error("Matmul: an epilogue vector of another type than C");
  run_checked(problem, ragged, a, b, {c.data, nullptr, vector.data, c.type == kernels::GradType::f32}, stream);
}

}  // namespace twin::exec
