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
//
// The host's part. Each weight's all-gather (`_allgather_param`, partition_parameters.py) runs after the hook's
// synchronisation, so the GPU waits while the host loops over the n ranks of the group twice: DeepSpeed makes a view
// of each rank's part and asks `get_rank(group)` for each, and PyTorch's list all_gather of 2020-21
// (ProcessGroupNCCL::allgather) copies each rank's part out of its flat buffer with one `copy_` per rank; the hook
// launches the sub-module's compute only after both. The lowering gives each gather op that host time (Op::host_ns)
// for the weights it fetches.
#pragma once
#include <cstdint>

#include "core/units.hpp"
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
  int prefetched_weights = 0;  // how many fetches of weights: each its own all-gather, with its host loops
  int on_demand_weights = 0;
};
// The most linear-weight elements (this rank's) a layer's hooks hold gathered at once in either pass: at each fetch the
// weight's own and those kept for a later use, plus the next weight where the hook prefetches it (the memory model's
// ZeRO-3 gather buffers under DeepSpeed, strategies/memory.cpp).
std::int64_t deepspeed_peak_gathered_elements(const RankShapes& shapes, bool moe_layer, bool full_recompute);
// The largest linear weight's elements (this rank's): its whole fp16 gradient exists before the hook reduces it.
std::int64_t deepspeed_largest_weight_elements(const RankShapes& shapes, bool moe_layer);

// The host's time per rank of the group for one weight's all-gather, measured (not fitted) by
// tools/deepspeed_gather_host_cost.py on one H200 machine's host (PyTorch 2.11, Python 3.12, 2026-11-28; medians of
// 12 cases, docs/validation/deepspeed_gather_host_cost_2026-11-28.json): DeepSpeed's loop 3.4 us per rank (3.2-6.1),
// the copies issued 9.8 us per rank (6.8-13.7; issued from Python, so an upper bound of PyTorch's C++ loop).
inline constexpr TimeNs kDeepSpeedGatherHostNsPerRank = 3400 + 9800;

// The host time of `weights` all-gathers over a group of `group_size` ranks.
inline TimeNs deepspeed_gather_host_ns(int weights, int group_size) {
  return static_cast<TimeNs>(weights) * group_size * kDeepSpeedGatherHostNsPerRank;
}

// The GPU's memory passes around each collective, on the stream the collective runs on (memory-bound copies; their
// bytes per 16-bit element moved, read and written, are counted from the code):
//   - a weight's all-gather (`_allgather_param`, partition_parameters.py): `torch.zeros` of the gathered tensor before
//     it (2: written), and PyTorch's list all_gather (ProcessGroupNCCL::allgather of 2020-21) gathers into a flat
//     buffer of its own and copies each rank's part out of it into DeepSpeed's views (2 read + 2 written). The zeros
//     run before the hook's synchronisation and the copies after the collective; both are counted after it.
//   - a gradient bucket's all-reduce (`allreduce_bucket` and `allreduce_and_copy`, stage3.py, on the reduction
//     stream): the bucket's gradients flattened into one tensor (2 + 2) and divided by the group size in place
//     (2 + 2) before it, the reduced values copied back into each gradient (2 + 2) after it.
inline constexpr std::int64_t kDeepSpeedGatherCopyBytesPerElement = 2 + 2 + 2;
inline constexpr std::int64_t kDeepSpeedReduceCopyInBytesPerElement = 2 + 2 + 2 + 2;
inline constexpr std::int64_t kDeepSpeedReduceCopyOutBytesPerElement = 2 + 2;

DeepSpeedLayerGathers deepspeed_layer_gathers(const RankShapes& shapes, bool moe_layer, bool backward,
                                              bool full_recompute);

}  // namespace twin::lowering
