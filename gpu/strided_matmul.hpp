// Row-major bf16 products over strided views through cuBLASLt, fp32 accumulation: C_i = alpha op(A_i) op(B_i) +
// beta C_i for `count` problems, each operand's rows `ld` elements apart and its problems `batch_stride` apart. The
// batched products of unfused attention (gpu/unfused_attention.hpp), whose operands are a head's rows inside the
// QKV tensor or one score matrix among many; gpu/matmul.hpp serves contiguous ones. Each distinct problem gets
// its descriptors and heuristic algorithm once.
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

struct StridedOperand {
  std::int64_t ld = 0;            // elements between a stored row and the next
  std::int64_t batch_stride = 0;  // elements between one problem's first element and the next's
  auto tie() const { return std::tie(ld, batch_stride); }
};

// A stored [m,k] ([k,m] when transpose_a), B [k,n] ([n,k] when transpose_b), C [m,n]. `accumulate`: beta 1, else 0.
struct StridedProblem {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false, accumulate = false;
  StridedOperand a, b, c;
  int count = 1;
  auto tie() const { return std::tie(m, n, k, transpose_a, transpose_b, accumulate, a.ld, a.batch_stride, b.ld,
                                     b.batch_stride, c.ld, c.batch_stride, count); }
  bool operator<(const StridedProblem& other) const { return tie() < other.tie(); }
};

class StridedMatmul {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32ull << 20;
  StridedMatmul();
  ~StridedMatmul();
  StridedMatmul(const StridedMatmul&) = delete;
  StridedMatmul& operator=(const StridedMatmul&) = delete;

  // Enqueues on `stream`; throws std::runtime_error when cuBLASLt has no algorithm for the problem.
  void run(const StridedProblem& problem, float alpha, const __nv_bfloat16* a, const __nv_bfloat16* b,
           __nv_bfloat16* c, cudaStream_t stream);

 private:
  struct Plan;
  const Plan& plan_for(const StridedProblem& problem);
  cublasLtHandle_t handle_ = nullptr;
  gpu::DeviceBuffer workspace_;
  std::map<StridedProblem, std::unique_ptr<Plan>> plans_;
};

}  // namespace twin::exec
