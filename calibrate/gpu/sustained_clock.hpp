// The SM clock a GPU sustains at its power limit under loads of several GEMM duties (cost/sustained_clock.hpp).
//
// Why this design. A GPU at its cap trades clock for power, and power grows with tensor-core activity: back-to-back
// GEMMs hold it lowest (the calibration's heater read ~1,460 MHz on an H200), a training step, whose memory-bound
// kernels draw less, higher (1,470-1,620 MHz in the 2026-11-28 clock studies). So the load is a training step's mix
// reduced to its two kinds: large bf16 GEMMs (8192^3, ~1.5 ms each, as training's large GEMMs) and the training's
// own memory-bound kernel (residual_add over 512 MiB operands), back to back without idle gaps, in a period of
// ~6-15 ms: four GEMMs, then as many adds as the duty leaves (under FP8 GEMMs, whose tensor-core work draws more
// power per second, the same load with E4M3 operands: periods of ~4-10 ms). The period is far shorter than the power limiter's
// averaging (the clock moves over ~100 ms, calibrate/gpu/clock_probe.hpp), so the limiter settles on the period's
// mean power, as in a training step whose layers alternate GEMMs and memory-bound kernels at that scale. Each point
// runs several seconds after a heating phase at full duty, and only its last part counts (the first `settle_s` is
// the limiter finding its clock). A clock probe follows every period's GEMMs (the clock they ran at) and every
// period's adds; the duty reported is the measured one (CUPTI spans), not the one asked for. Before the heating, a
// short burst of GEMMs between two probes (as calibration times a shape) gives their throughput per MHz on a cool
// GPU: each point's GEMM clock is its GEMMs' throughput over that, the clock their own cycles tell.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nccl.h>

#include "calibrate/sustained_clock_curve.hpp"
#include "cost/power_model.hpp"
#include "core/op.hpp"

namespace twin::gpu {

struct SustainedClockLoad {
  std::vector<double> gemm_duties{1.0, 0.8, 0.6, 0.4};  // asked for, in this order
  double heat_s = 2.0;    // full duty before the first point, so that every point starts hot
  // Per duty, and of it not counted (since 2026-12-01; 4 and 1.5 s before, issue 43): the limiter moves the clock
  // over ~100 ms, and points of 2 s with 1 s settling read the GEMMs' clock as the 4 s ones (docs/PROFILES.md).
  double point_s = 3.0;
  double settle_s = 1.0;
  // The GEMMs' operands: bf16 (the profile's `sustained_clock`) or fp8_per_tensor (E4M3 x E4M3 with unit scales, as
  // calibration times FP8 shapes: `sustained_clock_fp8`); the same 8192^3 problem, the same adds, the same periods.
  GemmInputs gemm_inputs = GemmInputs::bf16;
  // The power model's loads after the curve (cost/power_model.hpp), each `power_load_s` long: memory-bound adds
  // alone, then the one-thread clock probe alone (the first `power_load_settle_s` of each not counted: neither
  // reaches the cap), then the curve's GEMMs beside the one-thread probe (idle SMs, not adds) at each of
  // `idle_gemm_duties` (the first `settle_s` not counted: they may reach the cap), the same GEMMs at higher clocks
  // than at full duty; then, with `held_out_loads`, the experts' grouped GEMM and attention at full duty
  // (calibrate/gpu/power_load_units.hpp), which the fit never reads. power_load_s 0: none (the FP8 load, whose curve
  // the power model does not read).
  double power_load_s = 3.0;
  double power_load_settle_s = 0.5;
  std::vector<double> idle_gemm_duties{0.75, 0.5};
  bool held_out_loads = true;
  static SustainedClockLoad quick() {
    return {{1.0, 0.8, 0.6, 0.4}, 0.5, 1.5, 0.5, GemmInputs::bf16, 1.0, 0.3, {0.75, 0.5}, true};
  }
};

// Runs the load on the current device (every rank calls it at the same time, so that the GPUs share the host's
// power and cooling as in training) and returns one reading per duty, in the order asked, then (power_load_s > 0)
// one per power load, in power_load_names' order. Each with its mean power where NVML can be opened (0 where not).
std::vector<SustainedClockReading> measure_sustained_clock(const SustainedClockLoad& load);

// What each of the power loads after the curve runs, in measure_sustained_clock's order (none: power_load_s 0).
std::vector<std::string> power_load_names(const SustainedClockLoad& load);

struct SustainedClockMeasurement {
  SustainedClockCurve curve;
  PowerModel power;  // fitted on the readings' medians over the GPUs (calibrate/power_model_fit.hpp); absent: no
                     // power loads, no NVML, or a fit the readings cannot carry (logged)
};

// Every rank measures at once; on every rank the curve of all of them (sustained_clock_curve) and the power model,
// each GPU's readings and the fit logged through `progress` on rank 0.
SustainedClockMeasurement measure_sustained_clock_on_ranks(ncclComm_t world, int rank, int world_size,
                                                           const SustainedClockLoad& load,
                                                           const std::function<void(const std::string&)>& progress);

}  // namespace twin::gpu
