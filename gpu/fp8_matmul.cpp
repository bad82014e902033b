// Row-major C[m,n] = A[m,k] B[n,k]^T is column-major C^T (n x m) = B' A' with B' the stored [n,k] read
// transposed (cuBLASLt's A, CUBLAS_OP_T, k x n with leading dimension k) and A' the stored [m,k] (cuBLASLt's B,
// CUBLAS_OP_N, k x m with leading dimension k): the TN form Hopper's FP8 kernels require.
#include "gpu/fp8_matmul.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/cublaslt_plan.hpp"

namespace twin::exec {

struct Fp8Matmul::Plan : CublasLtPlan {};

namespace {

cudaDataType_t fp8_type(bool e5m2) { return e5m2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3; }

using kernels::Fp8Scaling;

cublasLtMatmulMatrixScale_t scale_mode(Fp8Scaling scaling) {
  switch (scaling) {
    case Fp8Scaling::per_tensor: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case Fp8Scaling::blocks_1x128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case Fp8Scaling::blocks_128x128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  throw std::logic_error("FP8 GEMM: unknown scaling");
}

// Block scaling on both operands or neither, and not 128x128 on both (no such cuBLASLt kernel).
bool block_scaled(const Fp8MatmulProblem& p) {
  const bool a = p.a_scaling != Fp8Scaling::per_tensor, b = p.b_scaling != Fp8Scaling::per_tensor;
  if (a != b) throw std::invalid_argument("FP8 GEMM: block scaling on one operand and a tensor scale on the other");
  if (p.a_scaling == Fp8Scaling::blocks_128x128 && p.b_scaling == Fp8Scaling::blocks_128x128)
    throw std::invalid_argument("FP8 GEMM: 128x128 blocks on both operands (cuBLASLt runs 1D x 1D, 1D x 2D, 2D x 1D)");
  return a;
}

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

}  // namespace

Fp8MatmulProblem fp8_problem_of(const GemmShape& shape) {
  Fp8MatmulProblem problem{shape.m, shape.n, shape.k, shape.e5m2, false, false};
  if (shape.inputs == GemmInputs::fp8_blockwise || shape.inputs == GemmInputs::fp8_blockwise_1d) {
    problem.a_scaling = Fp8Scaling::blocks_1x128;
    problem.b_scaling =
        shape.inputs == GemmInputs::fp8_blockwise ? Fp8Scaling::blocks_128x128 : Fp8Scaling::blocks_1x128;
  }
  return problem;
}

Fp8Matmul::Fp8Matmul(std::size_t workspace_bytes) : workspace_(workspace_bytes), unit_scales_(sizeof(float)) {
  const float one = 1.0f;
  TWIN_CUDA_CHECK(cudaMemcpy(unit_scales_.data(), &one, sizeof(one), cudaMemcpyHostToDevice));
  TWIN_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Fp8Matmul::~Fp8Matmul() {
  plans_.clear();
  cublasLtDestroy(handle_);
}

Fp8Matmul::Plan* Fp8Matmul::find_or_make(const Fp8MatmulProblem& p) {
  if (auto found = plans_.find(p); found != plans_.end()) return found->second.get();
  if (p.m % 16 || p.n % 16 || p.k % 16)
    throw std::invalid_argument(fmt::format("FP8 GEMM m={} n={} k={}: cuBLASLt's FP8 kernels need multiples of 16",
                                            p.m, p.n, p.k));
  if (p.a_e5m2 && p.b_e5m2) throw std::invalid_argument("FP8 GEMM: cuBLASLt has no E5M2 x E5M2 kernel");
  const bool blocks = block_scaled(p);
  auto plan = std::make_unique<Plan>();
  describe_product(*plan, /*transpose_a=*/false, /*transpose_b=*/true);  // the TN layout Hopper's FP8 kernels take
  const std::int8_t fast_accumulation = p.a_e5m2 || p.b_e5m2 || blocks ? 0 : 1;
  set(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accumulation);
  if (blocks) {  // cuBLASLt's A is our B and its B our A
    set(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, scale_mode(p.b_scaling));
    set(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, scale_mode(p.a_scaling));
  }
  if (p.bias) {  // one value per row of cuBLASLt's column-major D (n x m): per column of ours
    set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF);
    set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, workspace_.data());  // the heuristic sees a pointer too
  }
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->first, fp8_type(p.b_e5m2), p.k, p.n, p.k));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->second, fp8_type(p.a_e5m2), p.k, p.m, p.k));
  TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->out, CUDA_R_16BF, p.n, p.m, p.n));
  plan->beta = p.accumulate ? 1.0f : 0.0f;
  // The heuristic must see scale pointers: an algorithm chosen without them was refused once they were set
  // (CUBLAS_STATUS_NOT_SUPPORTED on an H200, 2026-11-29; XLA met the same, openxla/xla pull request 40747). Each
  // run sets its operands' own.
  const float* unit = static_cast<const float*>(unit_scales_.data());
  set(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, unit);
  set(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, unit);
  if (!heuristic_algorithm(handle_, *plan, workspace_.bytes(), plan->algo)) plan.reset();
  return plans_.emplace(p, std::move(plan)).first->second.get();
}

Fp8Matmul::Plan& Fp8Matmul::plan_for(const Fp8MatmulProblem& p) {
  if (Plan* plan = find_or_make(p)) return *plan;
  throw std::runtime_error(fmt::format("cuBLASLt has no FP8 algorithm for GEMM m={} n={} k={} (E5M2 {}/{}, "
                                       "scaling {}/{}: 0 tensor, 1 1x128, 2 128x128; bias {})", p.m, p.n, p.k,
                                       p.a_e5m2, p.b_e5m2, int(p.a_scaling), int(p.b_scaling), p.bias));
}

bool Fp8Matmul::supports(const Fp8MatmulProblem& problem) {
  try {
    return find_or_make(problem) != nullptr;
  } catch (const std::invalid_argument&) {  // dimensions or operand types cuBLASLt's FP8 kernels never take
    return false;
  }
}

void Fp8Matmul::run(const Fp8MatmulProblem& problem, const void* a, const float* a_scale_inv, const void* b,
                    const float* b_scale_inv, __nv_bfloat16* c, cudaStream_t stream, const __nv_bfloat16* bias) {
  if (problem.bias != (bias != nullptr))
    throw std::invalid_argument("FP8 GEMM: a bias pointer exactly where the problem has a bias epilogue");
  for (const void* pointer : {a, b, static_cast<const void*>(c), static_cast<const void*>(a_scale_inv),
                              static_cast<const void*>(b_scale_inv), static_cast<const void*>(bias)})
    if (reinterpret_cast<std::uintptr_t>(pointer) % 16)
      throw std::invalid_argument("FP8 GEMM: operands, scales and bias must be 16-byte aligned");
  Plan& plan = plan_for(problem);
  // cuBLASLt's A is our B and its B our A: each scale goes with its operand.
  set(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scale_inv);
  set(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scale_inv);
  if (bias) set(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = 1.0f;
  const auto matmul = [&] {
    return cublasLtMatmul(handle_, plan.desc, &alpha, b, plan.first, a, plan.second, &plan.beta, c, plan.out, c,
                          plan.out, &plan.algo, workspace_.data(), workspace_.bytes(), stream);
  };
  cublasStatus_t status = matmul();
  // Refused with the plan's algorithm: once more with the heuristic's for this call's pointers (kept for later calls).
  if (status == CUBLAS_STATUS_NOT_SUPPORTED && heuristic_algorithm(handle_, plan, workspace_.bytes(), plan.algo))
    status = matmul();
  TWIN_CUBLAS_CHECK(status);
}

}  // namespace twin::exec
