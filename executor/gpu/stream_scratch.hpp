// What a compute stream's kernels write besides tensors. Each stream that runs compute ops (compute, and compute2
// under double strand) has its own, so that the two strands' GEMMs, norm backwards and routers, running at once,
// never share a workspace.
#pragma once
#include <memory>

#include "gpu/fp8_matmul.hpp"
#include "gpu/grouped_matmul.hpp"
#include "gpu/matmul.hpp"

namespace twin::exec {

struct StreamScratch {
  std::unique_ptr<Matmul> matmul;          // cuBLASLt and its workspace
  std::unique_ptr<GroupedMatmul> grouped;  // the experts' GEMMs (MoE models only)
  std::unique_ptr<Fp8Matmul> fp8_matmul;   // FP8 linears' GEMMs (training.fp8 only)
  float* norm_partials = nullptr;          // a norm backward's per-block weight-gradient sums
  // A linear's bias gradient from the GEMM epilogue (biased models only): bf16, or fp32 where the main gradients are;
  // room for fp32.
  void* bias_grad = nullptr;
  void* moe_sort_workspace = nullptr;      // the router's sort by expert (MoE models only)
};

}  // namespace twin::exec
