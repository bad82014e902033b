// Internal to the lowering: an MoE layer's experts block (router, shared experts, token dispatch, the grouped expert
// GEMMs, combine), as Megatron-LM's MoELayer issues it with the token dispatcher the framework names.
#pragma once
#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

// The experts block of the emitter's current layer, forward or backward, its routed shapes that layer's
// (RankShapes::moe_layer).
void emit_experts(Emitter& e, bool backward);

}  // namespace twin::lowering
