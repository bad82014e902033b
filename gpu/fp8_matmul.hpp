// FP8 GEMMs through cuBLASLt with per-tensor scaling and a bf16 product: the executor's FP8 linears
// (executor/gpu/fp8_linears.hpp) and calibration's FP8 GEMM timings (calibrate/gpu/gemm_bench.cpp) make the same
// calls. Hopper's FP8 kernels take only the "TN" layout (cuBLASLt's cublasLtMatmul: "A must be transposed and B
// non-transposed"), i.e. both operands with the reduction dimension contiguous, so a row-major problem here is
// C[m,n] = A[m,k] B[n,k]^T: the caller hands transposed copies where the math reads an operand the other way
// (gpu/fp8_cast.hpp's columnwise copies). Each operand is E4M3 or E5M2 (not both E5M2: cuBLASLt has no such
// kernel) with a device float that dequantizes it (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER / B_SCALE_POINTER), or with
// block scales (gpu/fp8_block_cast.hpp: the recipe blockwise), which cuBLASLt applies per block of 128 along k while
// it accumulates in FP32 (CUBLASLT_MATMUL_DESC_A_SCALE_MODE / B_SCALE_MODE, cuBLAS 12.9 and later; 1x128 by 1x128,
// 1x128 by 128x128 and 128x128 by 1x128, as Transformer Engine's common/gemm/cublaslt_gemm.cu allows).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/op.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/fp8_block_cast.hpp"

namespace twin::exec {

// C[m,n] = a_scale_inv b_scale_inv A[m,k] B[n,k]^T (+ C when accumulating). Fast accumulation (the tensor
// cores' own, without promotion to fp32 every few k-steps) where no operand is E5M2: Transformer Engine's choice,
// split accumulation for the gradients' GEMMs and fast for the forward (transformer_engine/pytorch/module/base.py
// _2X_ACC_FPROP False, _2X_ACC_DGRAD and _2X_ACC_WGRAD True), which in the hybrid format are the ones reading E5M2.
// Block-scaled operands (both or neither; not both 128x128) accumulate without fast accumulation (PyTorch's
// scaled_gemm refuses it with either block scaling). Their scale pointers are the records of gpu/fp8_block_cast.hpp.
struct Fp8MatmulProblem {
  std::int64_t m = 0, n = 0, k = 0;
  bool a_e5m2 = false, b_e5m2 = false, accumulate = false;
  kernels::Fp8Scaling a_scaling = kernels::Fp8Scaling::per_tensor, b_scaling = kernels::Fp8Scaling::per_tensor;
  // The product plus a bf16 bias of n (one per output column) in the epilogue (CUBLASLT_EPILOGUE_BIAS), as
  // Transformer Engine's FP8 GEMM adds a linear's bias; `supports` says where cuBLASLt has such a kernel.
  bool bias = false;
  auto tie() const { return std::tie(m, n, k, a_e5m2, b_e5m2, accumulate, a_scaling, b_scaling, bias); }
  bool operator<(const Fp8MatmulProblem& other) const { return tie() < other.tie(); }
};

// The problem calibration times for an FP8 GEMM of the op vocabulary (its m, n, k; an E5M2 operand as A where the
// shape says e5m2): the kernel is the same whichever operand holds the gradient. Block-wise operands: A 1x128 (the
// activation or gradient), B 128x128 (the weight), as the forward and data-gradient GEMMs read them.
Fp8MatmulProblem fp8_problem_of(const GemmShape& shape);

class Fp8Matmul {
 public:
  explicit Fp8Matmul(std::size_t workspace_bytes = 32ull << 20);
  ~Fp8Matmul();
  Fp8Matmul(const Fp8Matmul&) = delete;
  Fp8Matmul& operator=(const Fp8Matmul&) = delete;

  // Enqueues on `stream`. Throws when m, n or k is no multiple of 16 (cuBLASLt's FP8 alignment), an operand or a
  // scale pointer is not 16-byte aligned, the block scalings are not a pair cuBLASLt runs, or cuBLASLt has no
  // algorithm for the problem (std::runtime_error naming the problem).
  // `bias` (16-byte aligned, n elements) where problem.bias, else nullptr.
  void run(const Fp8MatmulProblem& problem, const void* a, const float* a_scale_inv, const void* b,
           const float* b_scale_inv, __nv_bfloat16* c, cudaStream_t stream, const __nv_bfloat16* bias = nullptr);
  // Whether cuBLASLt has an algorithm for the problem (false for one it refuses: dimensions, operand types).
  bool supports(const Fp8MatmulProblem& problem);

 private:
  struct Plan;
  Plan& plan_for(const Fp8MatmulProblem& problem);
  Plan* find_or_make(const Fp8MatmulProblem& problem);  // nullptr: no algorithm
  cublasLtHandle_t handle_ = nullptr;
  gpu::DeviceBuffer workspace_;
  gpu::DeviceBuffer unit_scales_;  // a device float of 1: the scale pointers the heuristic sees
  std::map<Fp8MatmulProblem, std::unique_ptr<Plan>> plans_;  // nullptr: cuBLASLt has no algorithm
};

}  // namespace twin::exec
