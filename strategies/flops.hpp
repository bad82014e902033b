// FLOP accounting for MFU and HFU. The default formula is Megatron-LM's num_floating_point_operations:
// 3 passes (fwd, dgrad, wgrad) x 2 (FMA) x GEMM sizes per token, GQA-, SwiGLU- and MoE-aware, with
// causal attention halved. HFU adds the forward work that recompute repeats.
#pragma once
#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin {

// Model FLOPs of one iteration (global batch), Megatron formula.
double model_flops_per_iteration(const Scenario& scenario);
// Hardware FLOPs: model FLOPs plus recomputed forward work under `recompute`: the whole layer's under full, core
// attention's under selective when `modules` has core_attn. The other modules' repeated work (MLA's up projections, a
// dense MLP, the experts) is priced by the lowering but not counted here.
double hardware_flops_per_iteration(const Scenario& scenario, Recompute recompute,
                                    RecomputeModuleMask modules = module_bit(RecomputeModule::core_attn));

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
