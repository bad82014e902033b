// The built-in profile: ESTIMATES for every GPU preset, from datasheets, public measurements and NCCL
// busbw fractions (docs/PROFILES.md gives the source of each number). `twin calibrate` replaces them.
#include "calibrate/profile.hpp"

namespace twin {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Flash-style attention reaches a lower fraction of peak than GEMM (FlashAttention-2 reports ~50-70%
// forward, ~40-50% backward on A100/H100); the memory-bound kernels reach ~85% of HBM bandwidth.
GpuKernelProfile estimate(const std::string& gpu, double gemm_peak, double gemm_half_flops) {
  GpuKernelProfile p;
  p.gpu = gpu;
  p.gemm = {gemm_peak, gemm_half_flops};
  p.attention_forward = {0.60, gemm_half_flops};
  p.attention_backward = {0.45, gemm_half_flops};
  p.memory_bound = {0.85, 4 * kMiB};
  p.launch_overhead_ns = 2000;
  return p;
}

Profile make_builtin() {
  Profile p;
  p.version = 1;
  p.name = "builtin";
  p.builtin = true;
  p.provenance = {{"source", "estimates: datasheets, public measurements, NCCL busbw fractions"},
                  {"document", "docs/PROFILES.md"}};
  // Hopper: 0.80 x 989.4 = 792 TFLOP/s at large sizes, as measured for an 8192^3 bf16 GEMM (769-798).
  p.gpus.push_back(estimate("H100-SXM-80GB", 0.80, 1.5e9));
  p.gpus.push_back(estimate("H200-141GB", 0.80, 1.5e9));
  // Ampere data-centre parts saturate at smaller GEMMs (fewer, slower SMs relative to launch cost).
  p.gpus.push_back(estimate("A100-SXM-40GB", 0.80, 5e8));
  p.gpus.push_back(estimate("A100-SXM-80GB", 0.80, 5e8));
  p.gpus.push_back(estimate("A800-80GB", 0.80, 5e8));
  // Consumer Ada / Ampere: lower sustained fraction (power and clock limits), saturate earlier still.
  p.gpus.push_back(estimate("RTX-4090", 0.75, 2e8));
  p.gpus.push_back(estimate("RTX-3090", 0.75, 2e8));
  p.gpus.push_back(estimate("RTX-3080Ti", 0.75, 2e8));
  // NVSwitch all-reduce busbw ~360 of 450 GB/s; half of it at 16 MiB; 1.5 us per ring step.
  p.intra_node = {1.5, {0.80, 16 * kMiB}};
  p.intra_node_pcie = {1.5, {0.75, 16 * kMiB}};
  // InfiniBand / RoCE: ~90% of line rate for large messages, half of it at 8 MiB, 5 us per step.
  p.inter_node = {5.0, {0.90, 8 * kMiB}};
  // Galvatron measured overlap_coe ~1.1256 for compute under concurrent NCCL.
  p.overlap = {1.10, 1.05};
  return p;
}

}  // namespace

const Profile& builtin_profile() {
  static const Profile profile = make_builtin();
  return profile;
}

}  // namespace twin
