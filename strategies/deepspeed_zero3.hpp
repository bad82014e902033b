// DeepSpeed's ZeRO stage 3 as it ran in April 2021 (microsoft/DeepSpeed at c83e49f, 2021-04-14; the framework
// Narayanan et al. 2021 compared against, docs/FRAMEWORK.md "DeepSpeed ZeRO-3"): what of it the lowering needs
// beyond twin's Megatron-style ZeRO-3.
//
// The model of a layer's gathers. DeepSpeed fetches each sub-module's parameters in its pre-forward (and
// pre-backward) hook, in the order the sub-modules run: under full recompute a layer's backward runs its linears'
// recomputed forward (qkv, projection, fc1, fc2), then their backward (fc2 .. qkv). After the fetch, the hook
// prefetches the next parameters not yet available, beside the sub-module's compute, but only while the
// parameters fetched and not released hold fewer than stage3_max_live_parameters elements. Every all-gather first
// waits for the whole device (`torch.cuda.synchronize()` in `_allgather_param`, partition_parameters.py), so a
// weight that was not prefetched is gathered after the sub-module before it has finished: exposed.
#pragma once
#include <cstdint>

#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

// stage3_max_reuse_distance's default (deepspeed/runtime/zero/constants.py): a fetched parameter is kept instead of
// released when the parameters used before its next use hold fewer elements than this.
inline constexpr std::int64_t kDeepSpeedMaxReuseDistanceElements = 1000000000;

// stage3_max_live_parameters' default (constants.py, ZERO_OPTIMIZATION_MAX_LIVE_PARAMETERS_DEFAULT): a pre-hook
// prefetches only while the available parameters hold fewer elements than this (prefetch_next_sub_modules,
// stage3.py: `self.total_available_parameter_numel < self.max_available_parameters_in_numel`).
inline constexpr std::int64_t kDeepSpeedMaxLiveElements = 1000000000;

// Elements of one layer's linear weights (this rank's) that DeepSpeed gathers a second time in the backward under
// full recompute: the recomputed forward gathered them all, and a weight is released again after its recomputed
// forward unless the weights used before its backward (the later linears' recomputed forward and backward) hold
// fewer than kDeepSpeedMaxReuseDistanceElements (PartitionedParameterCoordinator._keep_for_later, stage3.py).
// The experts block of an MoE layer is left out (DeepSpeed of 2021 ran no expert parallelism under stage 3).
std::int64_t deepspeed_regathered_elements(const RankShapes& shapes, bool moe_layer);

// A layer's linear-weight elements (this rank's) gathered in one pass, as prefetched (beside the compute of the
// sub-module before them) or on demand (after it, exposed). Forward: each linear once. Backward under full
// recompute: each once for the recomputed forward, then the regathered ones (deepspeed_regathered_elements) for
// their backward. Backward without it: each once, last linear first. The hook that issues a weight's gather is the
// one of the weight gathered before it (the previous layer's last, layers being alike); it prefetches when its
// live elements, its own weight and the weights kept for a later use, are under kDeepSpeedMaxLiveElements.
struct DeepSpeedLayerGathers {
  std::int64_t prefetched_elements = 0;
  std::int64_t on_demand_elements = 0;
};
DeepSpeedLayerGathers deepspeed_layer_gathers(const RankShapes& shapes, bool moe_layer, bool backward,
                                              bool full_recompute);

}  // namespace twin::lowering
