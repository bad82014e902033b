// The SM clocks a rank class's GPUs hold through its step, read off the profile's sustained-clock curves
// (cost/sustained_clock.hpp: one measured under BF16 GEMMs, one under FP8 GEMMs) at the step's GEMM duty: the share of
// the class's compute busy time that compute-bound kernels (GEMMs and attention, what loads the tensor cores and
// draws the power) take, each compute op of its passes priced at the profile's reference clock and each compute-bound
// one counted as the time the curve's own load (8192^3 GEMMs) would take for its FLOPs, at most its own (a step of
// small GEMMs draws less than the curve's load at the same share of time in them), and at the share of
// that compute-bound time in FP8 GEMMs (step_clock_at states how the two curves combine). Each GPU's power limiter
// sets its own clock from its own load, so each class gets its own. One pass over the class's ops before it is
// flattened: no second simulation, and the same graph always gives the same clocks.
#pragma once
#include <cstdint>

#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "cost/profile.hpp"
#include "sim/price_cache.hpp"

namespace twin::sim {

// Of `rank_class`'s compute busy time in its forward and backward passes (the optimizer step left out): `duty`, the
// share compute-bound kernels take counted at the curve's load's FLOP rate, in [0, 1] (0 for a class without such
// ops), and `fp8_share`, the share of that compute-bound time in FP8 GEMMs, and its GEMMs' rows. Prices through `prices` (may be null) at
// the reference clock.
struct StepDuty {
  double duty = 0;
  double fp8_share = 0;
  // The rows (m) that carry the most of its forward GEMMs' FLOPs: a dense model's tokens per micro-batch (0: no GEMM).
  std::int64_t gemm_rows = 0;
  bool grouped_gemms = false;  // whether any GEMM is a grouped one (an MoE layer's experts)
};
StepDuty step_duty(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices);

// The class's passes (as step_duty's) as the power model's work (cost/power_model.hpp): their compute priced at the
// reference clock, split into the time that follows the SM clock and the rest, the FLOPs of the compute-bound ops
// and the bytes of the memory-bound ones.
StepWork step_work(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices);

// The clocks to price the class's compute-bound kernels at: {0, 0} (the profile's own pricing, unchanged) where the
// GPU's kernel profile states sustained_sm_clock_MHz (a run's clock folded in wins) or holds neither curve nor power
// model (a profile with traced shapes gets a clock: compute_time_ns weighs it against their in-situ ratios, which
// hold the training clock already, by how near they lie to each op); else, where the profile has
// a power model and the class no FP8 GEMM, the clock where the class's power meets the cap (power_limited_clock_MHz
// over its passes: their compute priced at the reference clock, their FLOPs and memory-bound bytes), else
// step_clock_at of its curves at the class's duty and FP8 share, times the profile's gemm_rows_clock factor at the
// class's GEMM rows where it has no FP8 and no grouped GEMM (cost/gemm_rows_clock.hpp; 1 where the profile has none).
// With the curve, where every point records its load's GEMM throughput (gemm_tflops), GEMMs get a clock of their own
// (StepClock::gemm_MHz, times the same factor): the clock at which the load's GEMM, priced from its micro-benchmark at
// the reference clock by the GEMM clock law, takes the time the load measured at the class's duty. Why: on an H100
// the GEMMs under the load did not follow the probe's clock at low duty (docs/ACCURACY.md "GEMMs at the throughput
// the load measured").
StepClock step_clock(const RankClass& rank_class, const Profile& profile, const GpuSpec& gpu, PriceCache* prices);

}  // namespace twin::sim
