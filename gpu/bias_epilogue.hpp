// A product with a bias per output column, one rule for every caller whose library may or may not fuse it: in the
// product's epilogue where the vector is aligned (epilogue_vector_aligned) and the library has such a kernel, else
// the plain product and kernels::bias_add after it (the router's logits, executor/gpu/moe_block.cpp; the FP8
// linears, executor/gpu/fp8_linears.cpp).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

#include "gpu/kernels.hpp"
#include "gpu/matmul.hpp"

namespace twin::exec {

// C [rows, cols] by `run(bias)`: with `bias` in its epilogue when `fused_supported()` (asked only for an aligned
// bias), else `run(nullptr)` and the bias added after it; no bias (nullptr): `run(nullptr)` alone. `Vector` is the
// bias's element type as the library's call takes it (const or not).
template <class Vector, class Supported, class Run>
void product_with_bias(Vector* bias, Supported&& fused_supported, Run&& run, __nv_bfloat16* c, std::int64_t rows,
                       std::int64_t cols, cudaStream_t stream) {
  if (epilogue_vector_aligned(bias) && fused_supported()) return run(bias);
  run(static_cast<Vector*>(nullptr));
  if (bias) kernels::bias_add(c, bias, rows, cols, stream);
}

}  // namespace twin::exec
