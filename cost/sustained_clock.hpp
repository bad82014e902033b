// The SM clock a GPU sustains at its power limit as a function of its load's GEMM duty: the share of its busy
// time that compute-bound kernels take. Power grows with tensor-core activity, and a GPU at its cap trades clock
// for power: back-to-back GEMMs hold it lowest, a training step, whose memory-bound kernels draw less, somewhat
// higher. `twin calibrate` measures the curve (calibrate/gpu/sustained_clock.hpp); the simulator reads it at each
// GPU's step duty (sim/step_clock.hpp). docs/PROFILES.md "The clock of a training step" has the figures.
#pragma once
#include <compare>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/op.hpp"

namespace twin {

// The GEMM the sustained-clock curves are measured under (calibrate/gpu/sustained_clock.cpp runs it back to back
// beside memory-bound adds) and the simulator counts a step's compute-bound time in (sim/step_clock.hpp): 8192^3,
// no transposes, of the curve's inputs (BF16; FP8 for sustained_clock_fp8). Chosen, not fitted: as large as
// training's large GEMMs, ~1.5 ms each on an H200.
GemmShape sustained_clock_load_gemm(GemmInputs inputs);

struct SustainedClockPoint {
  double gemm_duty = 0;      // share of the busy time in GEMMs under the measured load, (0, 1]
  double sm_clock_MHz = 0;   // the median over the calibration's GPUs of each GPU's settled clock
  std::vector<double> gpu_sm_clock_MHz;  // each GPU's, in rank order (the per-GPU spread)
  double gemm_tflops = 0;    // median over the GPUs of the GEMM's throughput under that load; 0: not recorded
  // The clock the load's GEMMs ran at as their own cycles tell: their throughput under the load over their
  // throughput per MHz in a short burst before it (timed between two probes, as calibration times its shapes), the
  // median over the GPUs. Recorded, not priced (step_clock_at says why). 0: not recorded (curves measured before
  // 2026-11-29 07:45 UTC).
  double gemm_clock_MHz = 0;
  // The median over the GPUs of the SM clock NVML reported over the point (calibrate/gpu/stream_marks.hpp): the scale
  // a run's clock is read on (the executor samples NVML), beside the probe's. On an H200 the two agree within 1.5%; on
  // an H100 at its cap NVML read 4-7% off the probe (docs/ACCURACY.md). Recorded, not priced. 0: not recorded (curves
  // measured before 2026-12-06).
  double nvml_sm_clock_MHz = 0;
  bool operator==(const SustainedClockPoint&) const = default;
};

// Points in ascending gemm_duty, each duty once; empty: not measured.
struct SustainedClockCurve {
  std::vector<SustainedClockPoint> points;
  bool operator==(const SustainedClockCurve&) const = default;
};

// The probe's clock (sm_clock_MHz) at `gemm_duty`: linear between the two points around it, the end point's beyond
// the measured range (the limiter's clock flattens where the load is far from the cap, and is not extrapolated); 0
// for an empty curve.
double sustained_clock_MHz_at(const SustainedClockCurve& curve, double gemm_duty);
// The same for the clock the load's GEMMs ran at by their cycles (gemm_clock_MHz where recorded, else sm_clock_MHz).
double gemm_clock_MHz_at(const SustainedClockCurve& curve, double gemm_duty);  // recorded, not priced: PROFILES.md
// The same for the throughput the load's GEMM ran at (gemm_tflops); 0 where a point lacks it or the curve is empty.
double loaded_gemm_tflops_at(const SustainedClockCurve& curve, double gemm_duty);

// The clock a training step's kernels run at (sim/step_clock.hpp): one SM clock for every kernel that follows it
// (BF16 and FP8 GEMMs, attention), as step_clock_at's model below states, and where the curves recorded their load's
// GEMM throughput, a clock of the GEMMs' own from it. 0: the profile's own pricing (its reference clock, or its
// sustained_sm_clock_MHz).
struct StepClock {
  double sm_MHz = 0;
  // The clock GEMMs are priced at where the curves recorded their load's GEMM throughput (sim/step_clock.hpp,
  // loaded GEMM clock); 0: sm_MHz, as for every other kernel.
  double gemm_MHz = 0;
  auto operator<=>(const StepClock&) const = default;
  bool operator==(const StepClock&) const = default;
};

// The model of a step that mixes BF16 and FP8 GEMMs, from the two curves measured alike (BF16 GEMMs, FP8 GEMMs):
// the power limiter answers the step's mean power over ~100 ms, longer than a layer, so the step holds one SM
// clock, and every kernel that follows the SM clock runs at it; a step of GEMM duty d whose compute-bound time is a
// share s in FP8 GEMMs holds (1 - s) x bf16(d) + s x fp8(d) of the probes' clocks (power is linear in what runs;
// each curve is the cap's clock for one kind of GEMM). The result is that clock. The clocks the
// GEMMs' cycles tell (gemm_clock_MHz) are not used: their burst reference read 6-13% above the probes under BF16
// and FP8 loads alike on an H200 (docs/PROFILES.md "Measured under FP8 GEMMs"), a bias of the burst, not a clock.
// Reduces to each curve where the step's GEMMs are all of one kind. No FP8 curve: every kernel at the BF16 curve's
// clock, as before 2026-11-29. An empty BF16 curve: {0}.
StepClock step_clock_at(const SustainedClockCurve& bf16, const SustainedClockCurve& fp8, double gemm_duty,
                        double fp8_share);

nlohmann::json sustained_clock_json(const SustainedClockCurve& curve);
// Throws InputError at the offending path: duties outside (0, 1] or not ascending, clocks outside [1, 1e5] MHz.
SustainedClockCurve read_sustained_clock(const JsonReader& r);

}  // namespace twin
