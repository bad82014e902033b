// The executor's linear layers: row-major bf16 GEMMs through cuBLASLt with fp32 accumulation. Each
// distinct problem gets its descriptors and heuristic algorithm once; later calls only launch.
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "calibrate/gpu/device_buffer.hpp"

namespace twin::exec {

// C[m,n] = A B (accumulate: C += A B). A is stored [m,k] ([k,m] when transpose_a), B [k,n] ([n,k] when
// transpose_b), C [m,n]; all row-major and contiguous.
struct MatmulProblem {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false, accumulate = false;
  auto tie() const { return std::tie(m, n, k, transpose_a, transpose_b, accumulate); }
  bool operator<(const MatmulProblem& other) const { return tie() < other.tie(); }
};

class Matmul {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32ull << 20;
  Matmul();
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // Enqueues on `stream`. Throws when cuBLASLt has no algorithm for the problem.
  void run(const MatmulProblem& problem, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c,
           cudaStream_t stream);

 private:
  struct Plan;
  const Plan& plan_for(const MatmulProblem& problem);
  cublasLtHandle_t handle_ = nullptr;
  gpu::DeviceBuffer workspace_;
  std::map<MatmulProblem, Plan*> plans_;
};

}  // namespace twin::exec
