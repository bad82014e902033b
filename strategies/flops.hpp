// FLOP accounting for MFU and HFU. The default formula is Megatron-LM's num_floating_point_operations:
// 3 passes (fwd, dgrad, wgrad) x 2 (FMA) x GEMM sizes per token, GQA-, SwiGLU- and MoE-aware, with
// causal attention halved. HFU adds the forward work that recompute repeats.
#pragma once
#include "core/scenario.hpp"
#include "core/strategy.hpp"

#include <string>

namespace twin {

// Model FLOPs of one iteration (global batch), Megatron formula.
double model_flops_per_iteration(const Scenario& scenario);
// Hardware FLOPs: model FLOPs plus recomputed forward work under `recompute`: the whole layer's under full, core
// attention's under selective when `modules` has core_attn. The other modules' repeated work (MLA's up projections, a
// dense MLP, the experts) is priced by the lowering but not counted here.
double hardware_flops_per_iteration(const Scenario& scenario, Recompute recompute,
                                    RecomputeModuleMask modules = module_bit(RecomputeModule::core_attn));

// The peak, in FLOP/s, that MFU and HFU divide by: a GPU's dense FP8 datasheet peak where the scenario trains its
// linears in FP8 and the GPU has one, its dense bf16 peak otherwise (so that neither passes 100%).
double gpu_peak_flops(const Scenario& scenario, const GpuSpec& gpu);
// The sum of gpu_peak_flops over the first `gpus` GPUs of the cluster (ranks fill node groups in order).
double peak_flops_of_first_gpus(const Scenario& scenario, int gpus);
// What the peak of a scenario is, in words: "dense FP8" or "dense bf16" (or both, for FP8 on a cluster of GPUs with
// and without an FP8 peak).
std::string peak_precision_text(const Scenario& scenario);

struct Throughput {
  double iteration_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;   // model FLOPs / (time * sum of GPU peaks)
  double hfu = 0;
};
Throughput throughput(const Scenario& scenario, const Strategy& strategy, double iteration_s);

inline constexpr const char* kFlopFormula =
    "Megatron-LM num_floating_point_operations (causal attention halved; GQA, SwiGLU, MoE top-k aware)";

}  // namespace twin
