// Grouped row-major bf16 GEMMs with fp32 accumulation through cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx):
// a dropless MoE layer's expert GEMMs, whose products differ in m (the tokens each expert got), in one call.
// The executor's expert GEMMs and the calibration's grouped GEMM benchmark, so that calibration times the very
// calls training makes. Conventions as gpu/matmul.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/device_buffer.hpp"

namespace twin::exec {

// One product of a group: C [m,n] = op(A) op(B), A stored [m,k] ([k,m] when transpose_a), B [k,n] ([n,k] when
// transpose_b), C [m,n], row-major and contiguous. The C of different groups must not overlap.
struct GemmGroup {
  std::int64_t m = 0, n = 0, k = 0;
  const __nv_bfloat16* a = nullptr;
  const __nv_bfloat16* b = nullptr;
  __nv_bfloat16* c = nullptr;
};

class GroupedMatmul {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32ull << 20;
  GroupedMatmul();  // its own cuBLAS handle
  ~GroupedMatmul();
  GroupedMatmul(const GroupedMatmul&) = delete;
  GroupedMatmul& operator=(const GroupedMatmul&) = delete;

  // Enqueues all groups on `stream` as one grouped GEMM (C = op(A) op(B), plus C when accumulate). A group with
  // m == 0 or n == 0 writes nothing; one with k == 0 (an expert that got no tokens, in a weight gradient) sets C
  // to zero, or leaves it when accumulating. Throws std::invalid_argument on negative sizes or null pointers of a
  // non-empty group (C when m, n > 0; A and B too when k > 0). The host may return from run() before the GPU
  // is done; runs on different streams must not overlap in time (they share one cuBLAS workspace).
  void run(std::span<const GemmGroup> groups, bool transpose_a, bool transpose_b, bool accumulate,
           cudaStream_t stream);

 private:
  struct Slot;  // one run's device pointer arrays and their pinned host staging
  static constexpr int kSlots = 8;
  cublasHandle_t handle_ = nullptr;
  gpu::DeviceBuffer workspace_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int next_slot_ = 0;
};

}  // namespace twin::exec
