// DeepSpeed's ZeRO stage 3 as it ran in April 2021 (microsoft/DeepSpeed at c83e49f, 2021-04-14; the framework
// Narayanan et al. 2021 compared against, docs/FRAMEWORK.md "DeepSpeed ZeRO-3"): what of it the lowering needs
// beyond twin's Megatron-style ZeRO-3.
#pragma once
#include <cstdint>

#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

// stage3_max_reuse_distance's default (deepspeed/runtime/zero/constants.py): a fetched parameter is kept instead of
// released when the parameters used before its next use hold fewer elements than this.
inline constexpr std::int64_t kDeepSpeedMaxReuseDistanceElements = 1000000000;

// Elements of one layer's linear weights (this rank's) that DeepSpeed gathers a second time in the backward under
// full recompute: the recomputed forward gathered them all, and a weight is released again after its recomputed
// forward unless the weights used before its backward (the later linears' recomputed forward and backward) hold
// fewer than kDeepSpeedMaxReuseDistanceElements (PartitionedParameterCoordinator._keep_for_later, stage3.py).
// The experts block of an MoE layer is left out (DeepSpeed of 2021 ran no expert parallelism under stage 3).
std::int64_t deepspeed_regathered_elements(const RankShapes& shapes, bool moe_layer);

}  // namespace twin::lowering
