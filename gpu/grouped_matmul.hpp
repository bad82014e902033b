// Grouped row-major bf16 GEMMs with fp32 accumulation: a dropless MoE layer's expert GEMMs, whose products
// differ in m (the tokens each expert got). Each group is one cuBLASLt call (gpu/matmul.hpp) in group order on
// the caller's stream, as Megatron-LM's sequential experts and Transformer Engine's grouped linear issue them:
// on an H200, cuBLAS's one-call grouped GEMM (cublasGemmGroupedBatchedEx) ran Mixtral-8x7B's expert GEMMs at a
// third of cuBLASLt's rate (docs/PERFORMANCE.md, "MoE"). The executor's expert GEMMs and the calibration's
// grouped GEMM benchmark both run here, so that calibration times the very calls training makes.
#pragma once
#include <cstdint>
#include <span>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/matmul.hpp"

namespace twin::exec {

// One product of a group: C [m,n] = op(A) op(B), A stored [m,k] ([k,m] when transpose_a), B [k,n] ([n,k] when
// transpose_b), C [m,n], row-major and contiguous. The C of different groups must not overlap. `vector`: the
// group's [n] for the run's epilogue (an expert's bias, or where its gradient goes), else nullptr. C and the vector
// are bf16, or fp32 in a run with an fp32 output (the experts' weight gradients into fp32 main gradients).
struct GemmGroup {
  std::int64_t m = 0, n = 0, k = 0;
  const __nv_bfloat16* a = nullptr;
  const __nv_bfloat16* b = nullptr;
  void* c = nullptr;
  void* vector = nullptr;
};

// What every group's epilogue does with its vector (gpt-oss's experts have biases, Megatron's add_bias_linear):
// add_bias adds it to each row of C; bias_grad_of_b writes there the sums of B's columns over k (B [k,n], not
// transposed, holding the output's gradient in a weight-gradient product; zeros for a group with k == 0).
// bias_grad_of_a is not a grouped epilogue. The epilogue runs in cuBLASLt's (as Transformer Engine's grouped linear
// runs its biases) where cuBLASLt has an algorithm for it and the vector is 16-byte aligned; elsewhere the plain
// product is followed by kernels::bias_add or kernels::bias_grad, the latter through `partials`
// (kernels::norm_partial_floats(k, n) floats of scratch).
struct GroupEpilogue {
  MatmulEpilogue kind = MatmulEpilogue::none;
  float* partials = nullptr;
};

class GroupedMatmul {
 public:
  // Enqueues every group on `stream` (C = op(A) op(B), plus C when accumulate). A group with m == 0 or n == 0
  // writes nothing; one with k == 0 (an expert that got no tokens, in a weight gradient) sets C to zero, or
  // leaves it when accumulating. Throws std::invalid_argument on negative sizes, null pointers of a non-empty
  // group (C when m, n > 0; A and B too when k > 0; its vector with an epilogue), or an epilogue the groups cannot
  // take (bias_grad_of_a; bias_grad_of_b with transpose_b).
  // `output`: the type of every group's C and vector (fp32 with no add_bias epilogue).
  void run(std::span<const GemmGroup> groups, bool transpose_a, bool transpose_b, bool accumulate,
           cudaStream_t stream, GroupEpilogue epilogue = {}, kernels::GradType output = kernels::GradType::bf16);
  // Heuristic queries so far (tests).
  int heuristic_queries() const { return matmul_.heuristic_queries(); }
  // Groups whose epilogue ran as separate kernels so far (tests).
  int unfused_epilogues() const { return unfused_epilogues_; }

 private:
  void check(std::span<const GemmGroup> groups, bool transpose_b, const GroupEpilogue& epilogue) const;
  void run_group(const GemmGroup& group, bool transpose_a, bool transpose_b, bool accumulate, cudaStream_t stream,
                 const GroupEpilogue& epilogue, kernels::GradType output);
  Matmul matmul_;  // ragged: one algorithm per bucket of m and k, eight per octave (gpu/matmul.hpp)
  int unfused_epilogues_ = 0;
};

}  // namespace twin::exec
