// Recalibration: folding the measured op times of an executed run into a profile. Shapes the run measured
// become exact entries (marked with the run, with the price they had: shapes near them inherit the ratio,
// cost/in_situ.hpp), collectives at a placement the profile has a table for become table rows, and
// other collectives get a correction per kind fitted over the run (docs/PROFILES.md).
// Pure arithmetic on values: reading a run folder and writing the profile and its changes file is
// traces/recalibration_run.hpp.
#pragma once
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/cluster.hpp"
#include "core/op.hpp"
#include "core/op_graph.hpp"
#include "core/units.hpp"

namespace twin {

// One op of one rank as the run measured it.
struct MeasuredOpSample {
  Op op;                   // as lowered: its shapes and bytes
  GpuSpec gpu;             // the GPUs of its rank class
  GroupSpan span;          // collectives: the placement of its group
  int rank = 0;
  int rank_class = 0;
  OpIndex index = 0;       // op id within the class (ops.csv op_id)
  TimeNs measured_ns = 0;  // median over the measured iterations (all its kernels, first start to last end)
  // Collectives only: the simulator's time for it alone under the profile's algorithm models, with no
  // correction (sim::isolated_time_ns of the tuned plan). Compute ops are priced here, by the profile.
  double model_ns = 0;
};

struct RunMeasurements {
  std::string run;                        // "trace:<run folder>", the source recorded in the profile
  // Compute ops and collectives that ran. A deque: a run of millions of rows grows it without the copy a vector's
  // doubling makes (the old and new buffers at once), and recalibrate() points at its elements.
  std::deque<MeasuredOpSample> samples;
  int absent_ops = 0;                     // ops with no kernel in any iteration (nothing to fold)
  int point_to_point_ops = 0;             // sends and receives: left out (their time includes waiting)
  int shared_gpu_ops = 0;                 // compute ops that ran beside another stream's compute: left out
  int other_attention_ops = 0;            // attention of a run with another implementation than profiles price: left out
  int other_kernel_ops = 0;               // ops whose kernel revision differs from the profile's (core/kernel_revisions.hpp)
  // An MoE run's routing (metrics.json's moe_routing): its experts, top-k and this one run.
  std::optional<MoeRouting> routing;
  // The median SM clock the run's GPUs held while busy (the run folder's gpu_clocks.csv,
  // traces/gpu_clocks.hpp); 0: not recorded.
  double sm_clock_MHz = 0;
  // The step clock the profile before the fold gives the run's plan from its sustained-clock curve (sim/step_clock.hpp,
  // the mean over the plan's rank classes); 0: none (a profile without a curve, or a stated sustained clock).
  double predicted_sm_clock_MHz = 0;
};

// One entry of the profile that recalibration set, with why.
struct ProfileChange {
  std::string entry;        // a JSON Pointer into the profile, e.g. "/gpus/0/measured/gemm:m=..."
  nlohmann::json old_value; // null when the entry is new
  nlohmann::json new_value;
  int samples = 0;          // ops (over ranks) the new value is fitted on
  std::string reason;
};

struct Recalibration {
  Profile profile;
  std::vector<ProfileChange> changes;  // exact entries, table rows, then corrections; each in key order
};

// The rules, in order:
//  0. the run's SM clock (when recorded), for its GPUs' kernel profiles that have a reference clock: where the profile
//     has a sustained-clock curve that gives the run's plan a step clock, the curve stays as measured and rule 1's
//     entries state the curve's clock for the plan (run_sm_clock_MHz, traced_sm_clock_MHz below: their ratios are then
//     taken without it, and each step near them applies its own clock, cost/in_situ.hpp; since 2026-12-01: scaling
//     the curve by one run's clock made other models' predictions worse, docs/ACCURACY.md "A fold that
//     generalizes"); else it becomes the profile's
//     sustained_sm_clock_MHz, one clock for every step. A property of the GPU in training, not of a shape, so it
//     moves the price of every GEMM the run did not measure; the rules below price on the profile with it.
//  1. compute ops, grouped by (GPU, kernel_shape_key): the entry becomes the median of the ops' medians
//     (p10/p90 over them, samples = ops), replacing a micro-benchmark or earlier value; source = run;
//     priced_ns = the shape's training_clock_time_ns after rule 0 (an earlier trace entry's priced_ns
//     when the shape was traced before), benchmark_ns = the micro-benchmark it replaced; run_sm_clock_MHz, where the
//     GPU's profile has a curve and no stated clock (its prices are at the reference clock: shapes near the entry then
//     take its ratio without the run's clock, cost/in_situ.hpp) = traced_sm_clock_MHz (since 2026-12-06, the
//     clock the curve gives the plan; before, the run's NVML clock as read).
//  2. collectives (all_reduce .. all_to_all), grouped by (GPU, kind, placement, bytes): where the profile
//     has that placement's table, the row at those bytes becomes the median (time, algbw, busbw).
//  3. per GPU and collective kind, over the run's collectives not placed in a table: this run's (sum
//     measured, sum of the samples' model_ns) replaces any earlier entry of the same run in the kind's
//     correction, and factor = sum of measured / sum of model over its runs.
//  4. MoE routing, by (num_experts, top_k): the run's entry (samples, mean imbalance) replaces any earlier entry
//     of the same run; the profile's routing_imbalance is the runs' mean weighted by samples.
// A run on a GPU without a kernel profile of its exact name gets one copied from kernels_for().
// Throws std::invalid_argument for a run with no samples or a fitted factor outside [0.001, 1000].
Recalibration recalibrate(const Profile& profile, const RunMeasurements& run);

// The clock rule 1's entries state (run_sm_clock_MHz) for a run whose profile prices steps by its curve: the clock the
// curve gives the run's plan, predicted_sm_clock_MHz, the scale every step is priced on (the run's offset from it
// stays in the entries' ratios), where the run's clock was recorded; 0 where it was not (the ratios hold it, as
// before 2026-12-01). Not the run's NVML clock: on an H100 at its cap NVML reads 8-9% below the probe the curve is
// measured with, and traced shapes stated at it were re-priced that much fast (docs/ACCURACY.md "A fold on one H100
// no longer makes its predictions worse").
double traced_sm_clock_MHz(const RunMeasurements& run);

// changes.json: {"format": "twin-profile-changes", "source_run", "profile", "previous", "changes": [...]}.
nlohmann::json changes_json(const Recalibration& result, const std::string& run, const std::string& profile_path,
                            const std::string& previous_path, const nlohmann::json& effect);
// The same as a short Markdown table.
std::string changes_markdown(const nlohmann::json& changes);

}  // namespace twin
