// What cost/memory_bound_bytes.cpp computes beside memory_bound_bytes and optimizer_bytes_per_parameter
// (cost/profile.hpp), for the GEMM pricing of cost/kernel_cost.cpp.
#pragma once
#include "core/op.hpp"

namespace twin {

// Bytes a GEMM's operands and product move (FP8 operands 1 byte each, the product bf16): its memory floor.
double gemm_bytes(const GemmShape& gemm);
// The residual stream a GEMM's epilogue adds (Op::fuses_residual): one more m x n read; 0 otherwise.
double epilogue_addend_bytes(const Op& op);

}  // namespace twin
