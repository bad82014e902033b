// Megatron-LM's overlapped EP schedule (--overlap-moe-expert-parallel-comm, the "combined 1F1B"): in the steady
// state a stage runs the forward of one micro-batch and the backward of another together, layer beside layer (the
// forward's layer i beside the backward's i-th from the end), and within a pair of MoE layers issues the ops so
// that one's EP all-to-alls run on the communication stream while the other computes. Read from NVIDIA/Megatron-LM
// d98e8a64dd (2026-08-22): TransformerLayerSchedulePlan.run in megatron/core/models/common/model_chunk_schedule_plan.py
// and megatron/core/pipeline_parallel/combined_1f1b.py:
//   comm stream:    combine_bwd      | dispatch_fwd -> dispatch_bwd   | combine_fwd
//   compute stream: pre_dispatch_fwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd | pre_dispatch_bwd
// (pre_dispatch: attention, the norm, the router and the permutation; mlp: the experts.) Every node of one
// micro-batch's layer waits for the one before it (they share a CUDA event), so the dispatch backward waits for the
// whole experts' backward unless --delay-wgrad-compute splits off their weight gradients (mlp_bwd_dw), which then
// run beside it.
#pragma once
#include <optional>
#include <span>
#include <vector>

#include "core/op.hpp"

namespace twin {

// One op of a layer pair as issued: which strand's (the backward's or the forward's), its index in that strand's
// ops, and, when >= 0, one more op of the same strand it waits for.
struct IssuedOp {
  bool backward = false;
  int index = 0;
  int also_after = -1;
  bool operator==(const IssuedOp&) const = default;
};

// The issue order of an MoE layer's forward ops beside an MoE layer's backward ops (each in its own lowering's
// order, every compute op on one compute stream), each op once; nullopt when either strand has not its two EP
// all-to-alls (forward: dispatch then combine; backward: combine then dispatch), which leaves nothing to overlap.
std::optional<std::vector<IssuedOp>> combined_layer_order(std::span<const Op> forward, std::span<const Op> backward,
                                                          bool delay_wgrad_compute);

}  // namespace twin
