// The SM clock a rank class's GPUs hold through its step, read off the profile's sustained-clock curve
// (cost/sustained_clock.hpp) at the step's GEMM duty: the share of the class's compute busy time that
// compute-bound kernels (GEMMs and attention, what loads the tensor cores and draws the power) take, each compute op
// of its passes priced at the profile's reference clock. Each GPU's power limiter sets its own clock
// from its own load, so each class gets its own. One pass over the class's ops before it is flattened: no second
// simulation, and the same graph always gives the same clock.
#pragma once
#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "cost/profile.hpp"
#include "sim/price_cache.hpp"

namespace twin::sim {

// The share of `rank_class`'s compute busy time in its forward and backward passes (the optimizer step left out)
// that compute-bound kernels take, in [0, 1]; 0 for a class without such ops. Prices through `prices` (may be null)
// at the reference clock.
double step_gemm_duty(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices);

// The clock to price the class's GEMMs at: 0 (the profile's own pricing, unchanged) where the GPU's kernel profile
// states sustained_sm_clock_MHz (a run's clock folded in wins), holds no curve, or holds traced shapes (their
// in-situ ratios hold the training clock already); else the curve at the class's duty.
double step_sm_clock_MHz(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices);

}  // namespace twin::sim
