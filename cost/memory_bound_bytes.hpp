// What cost/compute_kinds.cpp computes beside memory_bound_bytes and optimizer_bytes_per_parameter
// (cost/profile.hpp), for the GEMM pricing of cost/kernel_cost.cpp.
#pragma once
#include "core/op.hpp"

namespace twin {

// Bytes a GEMM's operands and product move (FP8 operands 1 byte each, the product bf16): its memory floor.
double gemm_bytes(const GemmShape& gemm);
// The bytes a GEMM's epilogue moves beyond a 16-bit product's write: the residual stream it adds
// (Op::fuses_residual, one more m x n read) and a gradient buffer it writes in fp32 or adds to (Op::gemm_output).
double epilogue_addend_bytes(const Op& op);

}  // namespace twin
