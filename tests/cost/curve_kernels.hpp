// A GPU's kernel profile of curves alone, no measured shape: GEMMs 0.80 * F / (F + 1.5e9) of the bf16 peak,
// attention 0.60 forward and 0.45 backward by FLOPs (the same for cuDNN's fused kernels), memory-bound 0.85 of HBM
// at half 4 MiB: the closed forms the cost tests compute prices from by hand.
#pragma once
#include <string>

#include "cost/profile.hpp"

namespace twin::testing {

inline GpuKernelProfile curve_kernels(const std::string& gpu) {
  GpuKernelProfile k;
  k.gpu = gpu;
  k.gemm = {0.80, 1.5e9};
  k.attention_forward = k.fused_attention_forward = {0.60, 1.5e9};
  k.attention_backward = k.fused_attention_backward = {0.45, 1.5e9};
  k.memory_bound = {0.85, 4.0 * 1024 * 1024};
  return k;
}

}  // namespace twin::testing
