// Row-major bf16 GEMMs through cuBLASLt with fp32 accumulation: the executor's linear layers and the
// calibration's GEMM benchmark, so that calibration times the very calls training makes. Each distinct
// problem gets its descriptors and heuristic algorithm once; later calls only launch.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/device_buffer.hpp"

namespace twin::exec {

// C[m,n] = A B (accumulate: C = A B + addend, where the addend is C itself unless run() is given another
// [m,n] tensor: a residual stream added in the epilogue, cuBLASLt's D = alpha A B + beta C with C != D). A is stored [m,k] ([k,m] when transpose_a), B [k,n] ([n,k] when
// transpose_b), C [m,n]; all row-major and contiguous; `count` such problems back to back (grouped GEMMs).
struct MatmulProblem {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false, accumulate = false;
  int count = 1;
  auto tie() const { return std::tie(m, n, k, transpose_a, transpose_b, accumulate, count); }
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

  // Enqueues on `stream`. Throws when cuBLASLt has no algorithm for the problem, or when `addend` is given to a
  // problem that does not accumulate.
  void run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
           cudaStream_t stream, const __nv_bfloat16* addend = nullptr);
  std::size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Plan;
  const Plan& plan_for(const MatmulProblem& problem);
  cublasLtHandle_t handle_ = nullptr;
  gpu::DeviceBuffer workspace_;
  std::map<MatmulProblem, std::unique_ptr<Plan>> plans_;
};

}  // namespace twin::exec
