// The built-in profile, grounded in measurements (docs/PROFILES.md, "The built-in profile", gives the source
// of every number): Hopper kernels are the shipped profiles twin calibrate measured (h100-x1, h200-x1),
// with attention at the speed of the kernels frameworks run (cuDNN and FlashAttention-2, measured here);
// Ampere data-centre GPUs take published measurements (maximum achievable matmul FLOPS, cuBLAS by size,
// BabelStream, FlashAttention-2); consumer GPUs stay estimates. Two parameters are fitted on published
// runs (cost/fitted_parameters.hpp; docs/VALIDATION.md, "What was fitted"): how much slower kernels run
// inside a training step than their benchmarks say, on Ampere and on Hopper. Links follow NCCL's own model
// (sim/nccl_model.hpp) at published bus bandwidths; the overlap slowdowns were measured on 4 H200s.
#include <algorithm>
#include <stdexcept>

#include "cost/fitted_parameters.hpp"
#include "cost/profile.hpp"
#include "cost/shipped_profiles.hpp"

namespace twin {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A kernel profile of curves only.
GpuKernelProfile curves(const std::string& gpu, SaturatingEfficiency gemm, SaturatingEfficiency attention_forward,
                        SaturatingEfficiency attention_backward, SaturatingEfficiency memory_bound) {
  GpuKernelProfile p;
  p.gpu = gpu;
  p.gemm = gemm;
  p.attention_forward = attention_forward;
  p.attention_backward = attention_backward;
  p.memory_bound = memory_bound;
  p.fused_attention_forward = attention_forward;
  p.fused_attention_backward = attention_backward;
  p.launch_overhead_ns = 2000;
  return p;
}

// The shipped profile `name`, parsed when asked for (the built-in needs two of them; parsing every shipped
// profile was a fifth of `twin simulate`'s time on one candidate).
Profile shipped(std::string_view name) {
  for (const ShippedProfile& p : shipped_profiles())
    if (p.name == name) return load_profile(std::string(p.name));
  throw std::logic_error("the built-in profile needs the shipped profile " + std::string(name));
}

// Attention on Hopper as frameworks run it: PyTorch's SDPA forced to one backend (bf16, causal, head dim 128,
// six shapes), fitted as peak * F / (F + half_work) on the smallest and largest shape. cuDNN's fused kernel is
// what Transformer Engine prefers on Hopper (Megatron's "fused"); FlashAttention-2 is "flash".
struct AttentionCurves {
  SaturatingEfficiency cudnn_forward, cudnn_backward, flash_forward, flash_backward;
};
// One H200 (docs/REFERENCES.md "Attention on one H200", 2026-11-24): cuDNN 541-620 TFLOP/s forward, 422-495
// backward; FlashAttention-2 271-290 and 219-287.
constexpr AttentionCurves kH200Attention{{0.659, 2.8e10}, {0.514, 4.0e10}, {0.295, 3e9}, {0.30, 8e10}};
// One H100 (`python3 tests/gpu/attention_backends.py` on nvidia-h100-x1, 2026-11-24, PyTorch 2.11, cuDNN 9.19;
// docs/validation/attention_h100_2026-11-24.json): cuDNN 545-623 forward, 317-469 backward; FlashAttention-2
// 273-312 and 187-269.
constexpr AttentionCurves kH100Attention{{0.662, 2.76e10}, {0.509, 1.0e11}, {0.328, 2.24e10}, {0.292, 1.0e11}};

// The micro-benchmarks of a shipped profile only: the one-GPU training runs folded into it (trace entries,
// Measurement::source) speak for that machine's steps; the built-in's in-training factor comes from published
// runs instead (cost/fitted_parameters.hpp). A trace entry gives back the benchmark it replaced, or goes where
// it replaced none.
void keep_benchmarks_only(std::map<std::string, Measurement>& measured) {
  std::erase_if(measured, [](const auto& entry) {
    return !entry.second.source.empty() && benchmark_time_ns(entry.second) <= 0;
  });
  for (auto& [key, m] : measured)
    if (!m.source.empty()) {
      const double benchmark_ns = benchmark_time_ns(m);
      m = Measurement{};
      m.median_ns = m.p10_ns = m.p90_ns = benchmark_ns;
      m.samples = 1;
    }
}

// A Hopper GPU's kernels from the shipped measured profile `name`: GEMMs by shape (about 4,300 shapes at the
// calibration's reference clock), every memory-bound kind twin's kernels run, as micro-benchmarked;
// attention entries dropped (they time the executor's attention, cuDNN's fused kernel through its graph
// API since 2026-11-24, not the frameworks' mix the validation rows ran) for the curves above.
GpuKernelProfile hopper(std::string_view name, const AttentionCurves& attention) {
  GpuKernelProfile p = shipped(name).gpus.front();
  keep_benchmarks_only(p.measured);
  std::erase_if(p.measured, [](const auto& entry) { return entry.first.starts_with("attention_"); });
  index_measured_shapes(p);
  p.attention_forward = attention.flash_forward;
  p.attention_backward = attention.flash_backward;
  p.fused_attention_forward = attention.cudnn_forward;
  p.fused_attention_backward = attention.cudnn_backward;
  // The in-training factor, fitted on published runs, already holds their GPUs' clock: a measured sustained-clock
  // curve would count it twice (docs/ACCURACY.md, "The clock of a training step").
  p.sustained_clock = {};
  // GEMMs at the clock of the prices its in-training factor was fitted or scaled against: its calibration's
  // reference clock, or, where the factor follows from a measured ratio, the clock of that ratio's prices.
  const double ratio_clock_MHz = following_benchmark_sm_clock_MHz(p.gpu);
  p.sustained_sm_clock_MHz = ratio_clock_MHz > 0 ? ratio_clock_MHz : p.reference_sm_clock_MHz;
  // The attention curves above were timed at no stated clock: priced as they are.
  p.attention_at_reference_clock = false;
  return p;
}

// Ampere data-centre GPUs, from publications (docs/validation/kernels_published.json):
//  - GEMM: 0.869 of 312 TFLOP/s at best (Bekman, "Maximum Achievable Matmul FLOPS", A100 SXM bf16), falling
//    to half of that at 5e9 FLOPs (NVIDIA's cuBLAS A100 chart of square GEMMs: 1024^3 0.28, 2048^3 0.63);
//  - HBM: BabelStream triad 0.846 of 2039 GB/s (A100 80 GB), 0.886 of 1555 GB/s (40 GB);
//  - flash attention: FlashAttention-2 (Dao 2023) on A100 80 GB, forward up to 0.73 and backward 0.63 of peak,
//    half of it (forward and backward together, head dim 128) near seq 512 x batch 32; cuDNN's fused kernel
//    is taken to match it (Transformer Engine prefers FlashAttention on Ampere: no measurement of cuDNN's);
constexpr SaturatingEfficiency kAmpereGemm{0.869, 5e9};
constexpr SaturatingEfficiency kAmpereAttentionForward{0.73, 2.45e10};
constexpr SaturatingEfficiency kAmpereAttentionBackward{0.63, 6.1e10};

GpuKernelProfile ampere(const std::string& gpu, double hbm_fraction) {
  GpuKernelProfile p = curves(gpu, kAmpereGemm, kAmpereAttentionForward, kAmpereAttentionBackward,
                              {hbm_fraction, 4 * kMiB});
  p.fused_attention_forward = kAmpereAttentionForward;
  p.fused_attention_backward = kAmpereAttentionBackward;
  return p;
}

// Consumer cards: no published measurement was found; estimates (docs/PROFILES.md).
GpuKernelProfile consumer(const std::string& gpu) {
  return curves(gpu, {0.75, 2e8}, {0.60, 2e8}, {0.45, 2e8}, {0.85, 4 * kMiB});
}

Profile make_builtin() {
  Profile p;
  p.version = 1;
  p.name = "builtin";
  p.builtin = true;
  // Its kernel curves are twin's, its in-situ priors fitted on published Megatron-LM and NeMo runs
  // (cost/fitted_parameters.hpp): what it predicts is a Megatron-style step.
  p.framework = FrameworkName::megatron_core;
  p.provenance = {{"source", "measured (Hopper: shipped profiles h100-x1, h200-x1, h200-x4) and published "
                             "(Ampere); consumer GPUs estimated"},
                  {"document", "docs/PROFILES.md"}};
  p.gpus.push_back(hopper("h100-x1", kH100Attention));
  p.gpus.push_back(hopper("h200-x1", kH200Attention));
  p.gpus.push_back(ampere("A100-SXM-40GB", 0.886));
  p.gpus.push_back(ampere("A100-SXM-80GB", 0.846));
  p.gpus.push_back(ampere("A800-80GB", 0.846));
  p.gpus.push_back(consumer("RTX-4090"));
  p.gpus.push_back(consumer("RTX-3090"));
  p.gpus.push_back(consumer("RTX-3080Ti"));
  // Collectives over 2-4 H200s of one node, measured (h200-x4, 2026-11-21); every other placement takes
  // NCCL's model over these links: ring all-reduce bus bandwidth of an 8-GPU NVSwitch node 0.77 of NVLink on
  // A100 (230 of 300 GB/s) and 0.82 on H100 (365-370 of 450): 0.80; 24 of 25 GB/s per HDR NIC in NCCL's
  // graph search and 40-45 of 50 per NDR NIC measured by default: 0.90 (docs/validation/nccl_published.json).
  // Bandwidth reaches half of that at 4 MiB on both links: chosen on the published nccl-tests points of at
  // least 1 MiB (a grid of 0 to 32 MiB; mean |error| of time 27.4% with none, 21.2% at 4 MiB; docs/VALIDATION.md).
  const Profile node = shipped("h200-x4");  // parsed once: a megabyte of JSON
  p.collectives = node.collectives;
  p.intra_node = {1.5, {0.80, 4 * kMiB}};
  p.intra_node_pcie = {1.5, {0.75, 0}};
  p.inter_node = {5.0, {0.90, 4 * kMiB}};
  // A 256 MiB all-reduce beside an 8192^3 GEMM on 4 H200s: the GEMM 1.26x and the all-reduce 1.45x slower
  // than alone (h200-x4 provenance.interference, 2026-11-21).
  p.overlap = node.overlap;
  // How much slower kernels run inside a training step than their benchmarks: fitted on published runs.
  for (const FittedParameter& fitted : builtin_fitted_parameters())
    p = with_fitted_value(std::move(p), fitted, fitted.value);
  return p;
}

}  // namespace

const Profile& builtin_profile() {
  static const Profile profile = make_builtin();
  return profile;
}

}  // namespace twin
