// Row-major bf16 GEMMs through cuBLASLt with fp32 accumulation: the executor's linear layers and the
// calibration's GEMM benchmark, so that calibration times the very calls training makes. Each distinct
// problem gets its descriptors and heuristic algorithm once; later calls only launch. Problems whose m or k
// changes from call to call (an MoE expert's rows) take run_ragged: asking cuBLASLt's heuristic for every new
// size kept the GPU waiting on the host inside the experts' GEMMs (docs/PERFORMANCE.md, "MoE").
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/device_buffer.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

// C[m,n] = A B (accumulate: C = A B + addend, where the addend is C itself unless run() is given another
// [m,n] tensor: a residual stream added in the epilogue, cuBLASLt's D = alpha A B + beta C with C != D). A is stored [m,k] ([k,m] when transpose_a), B [k,n] ([n,k] when
// transpose_b), C [m,n]; all row-major and contiguous; `count` such problems back to back (grouped GEMMs).
// What the epilogue writes beside C, with the vector given to run(): add_bias adds bias[n] to every row of C (a
// linear layer's bias); bias_grad_of_a writes vector[m] = the sums of op(A)'s rows over k, bias_grad_of_b vector[n]
// = the sums of op(B)'s columns over k (a linear's bias gradient inside its weight-gradient GEMM, by which operand
// holds the output's gradient). cuBLASLt's BIAS, BGRADB and BGRADA (its operands are ours swapped); the vector is
// bf16 (fp32 with f32_output). Not every layout has an algorithm with every epilogue: supports() says.
// f32_output: C (and the vector) fp32, A and B bf16: a weight gradient written into, or added to, fp32 main
// gradients (framework.main_grad_dtype float32), as Megatron's fused wgrad_gemm_accum_fp32 does.
enum class MatmulEpilogue { none, add_bias, bias_grad_of_a, bias_grad_of_b };

// Whether an epilogue can take `vector`: cuBLASLt reads and writes it at 16-byte alignment, and the parameter layout
// packs tensors, so a bias after a tensor of a width that is no multiple of 8 may lie off it (the caller then runs
// the plain product and the bias kernels, as the linears, the router and the experts do).
inline bool epilogue_vector_aligned(const void* vector) {
  return vector != nullptr && reinterpret_cast<std::uintptr_t>(vector) % 16 == 0;
}

struct MatmulProblem {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false, accumulate = false;
  int count = 1;
  MatmulEpilogue epilogue = MatmulEpilogue::none;
  bool f32_output = false;
  auto tie() const { return std::tie(m, n, k, transpose_a, transpose_b, accumulate, count, epilogue, f32_output); }
  bool operator<(const MatmulProblem& other) const { return tie() < other.tie(); }
};

class Matmul {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32ull << 20;
  // The heuristic picks algorithms that fit `workspace_bytes`.
  explicit Matmul(std::size_t workspace_bytes = kWorkspaceBytes);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // Enqueues on `stream`. Throws when cuBLASLt has no algorithm for the problem, when `addend` is given to a
  // problem that does not accumulate, or when `vector` is given exactly when the problem has no epilogue.
  void run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
           cudaStream_t stream, const __nv_bfloat16* addend = nullptr, __nv_bfloat16* vector = nullptr);
  // The product into fp32 C (problem.f32_output set; accumulating adds to C itself), the vector fp32 too.
  void run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, float* c,
           cudaStream_t stream, float* vector = nullptr);
  // A weight gradient into its buffer, bf16 or fp32 as `c` is (problem.f32_output must agree), the epilogue's
  // vector of the same type (unset: none); `ragged` as run_ragged (an expert's, whose m and k vary).
  void run_into_gradient(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b,
                         kernels::GradRef c, cudaStream_t stream, kernels::GradRef vector = {}, bool ragged = false);
  // Whether cuBLASLt has an algorithm for the problem within the workspace (asked once per problem).
  bool supports(const MatmulProblem& problem);
  // The same product for a problem whose m and k vary between calls: the algorithm is the heuristic's for the
  // problem with m and k rounded up to the next of eight steps per octave (a multiple of 2^(floor(log2 x) - 3); at
  // least 64), chosen once per such bucket, and used for the
  // exact problem when cuBLASLt confirms it supports it (cublasLtMatmulAlgoCheck; else the exact problem's own
  // heuristic). Each exact problem's descriptors are kept, as run's are: as many as the sizes seen. `vector` as
  // run's: exactly when the problem has an epilogue (an expert's bias, or its gradient).
  void run_ragged(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
                  cudaStream_t stream, __nv_bfloat16* vector = nullptr);
  void run_ragged(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, float* c,
                  cudaStream_t stream, float* vector = nullptr);
  // Whether run_ragged has an algorithm for the problem (found as run_ragged finds it, and kept for it).
  bool supports_ragged(const MatmulProblem& problem) { return find_ragged_plan(problem) != nullptr; }
  std::size_t workspace_bytes() const { return workspace_.bytes(); }
  // Heuristic queries made so far (tests: a ragged run's sizes share their bucket's).
  int heuristic_queries() const { return heuristic_queries_; }

 private:
  struct Plan;
  std::unique_ptr<Plan> make_plan(const MatmulProblem& problem);  // descriptors only
  cublasLtMatmulAlgo_t heuristic_algo(const Plan& plan, const MatmulProblem& problem);
  const Plan& plan_for(const MatmulProblem& problem);
  const Plan* find_plan(const MatmulProblem& problem);  // nullptr: no algorithm
  const Plan* find_ragged_plan(const MatmulProblem& problem);  // nullptr: no algorithm
  void launch(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const __nv_bfloat16* a, const __nv_bfloat16* b,
              void* c, const void* addend, void* vector, cudaStream_t stream);
  void check_call(const MatmulProblem& problem, bool has_addend, bool has_vector, bool f32_output) const;
  const Plan& ragged_plan_for(const MatmulProblem& problem);
  // C (bf16, or fp32 with f32), the addend and the epilogue's vector of one call, checked against its problem.
  struct Output {
    void* c;
    const void* addend;
    void* vector;
    bool f32;
  };
  void run_checked(const MatmulProblem& problem, bool ragged, const __nv_bfloat16* a, const __nv_bfloat16* b,
                   const Output& out, cudaStream_t stream);
  cublasLtHandle_t handle_ = nullptr;
  gpu::DeviceBuffer workspace_;
  std::map<MatmulProblem, std::unique_ptr<Plan>> plans_;  // nullptr: cuBLASLt has no algorithm
  std::map<MatmulProblem, std::optional<cublasLtMatmulAlgo_t>> bucket_algos_;  // ragged: per bucket problem
  int heuristic_queries_ = 0;
};

}  // namespace twin::exec
