// The SM clock of a training step from a model of the GPU's power: the clock where the step's mean power meets the
// GPU's cap, or the GPU's maximum clock where even that stays under it (issue 37 item 1, issue 40).
//
// Why a power model and not only the duty -> clock curve (cost/sustained_clock.hpp): the curve is measured with
// 8192^3 GEMMs beside 512 MiB adds, and a step of the same GEMM duty made of small expert GEMMs (10-40 tiles of a
// 132-SM H200 per call) draws far less: Qwen3-MoE- and DeepSeek-V3-shaped steps on one H200 held 1,950-1,965 MHz at
// 652-668 W, under the 700 W cap, where the curve said ~1,530 MHz (docs/ACCURACY.md). Power follows the work done
// per second, not the share of time a kind of kernel takes:
//
//   P(f) = static_W + (f / max_sm_clock_MHz)^clock_exponent x (pJ_per_flop x FLOP/s(f) + pJ_per_byte x byte/s(f))
//
// static_W is what the busy GPU draws at its maximum clock doing almost nothing (a one-thread spinning kernel: the
// leakage, the clock tree, the idle SMs and HBM); the energy per FLOP of tensor-core work and per byte of HBM traffic
// scale with the clock as DVFS lowers the voltage with it (dynamic energy per operation ~ V^2, and V falls with f:
// clock_exponent, fitted on the calibration's loads at the cap). FLOP/s(f) and byte/s(f) are the step's work over its
// busy time at clock f: compute-bound kernels' times follow 1/f, memory-bound ones' do not. Nothing here is fitted
// to training steps: calibrate/power_model_fit.hpp fits the four parameters on calibration's micro-benchmark loads
// only, and docs/PROFILES.md ("The power model") names the fit set and the held-out steps.
#pragma once
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"

namespace twin {

struct PowerModel {
  double static_W = 0;           // busy, at max_sm_clock_MHz, with no tensor-core or HBM work
  double pJ_per_flop = 0;        // dense BF16 tensor-core work, at max_sm_clock_MHz
  double pJ_per_byte = 0;        // HBM traffic of memory-bound kernels, at max_sm_clock_MHz
  double clock_exponent = 0;     // the energy per operation scales as (f / max)^clock_exponent
  double max_sm_clock_MHz = 0;   // the clock the GPU holds busy and under its cap (the one-thread load's)
  double power_cap_W = 0;        // the enforced power limit the limiter holds the mean power at
  bool present() const { return power_cap_W > 0; }
  bool operator==(const PowerModel&) const = default;
};

// What a step does in its busy time, priced at a reference clock: the time of the kernels whose time follows the SM
// clock (1/f: GEMMs, and attention where the profile times it at its reference clock), the rest's, and the work.
struct StepWork {
  double clocked_ns = 0;         // at reference_sm_clock_MHz
  double unclocked_ns = 0;       // memory-bound kernels, launch gaps: the same at any clock
  double reference_sm_clock_MHz = 0;
  double flops = 0;              // tensor-core work (GEMMs, attention)
  double bytes = 0;              // HBM traffic of the memory-bound kernels
};

// The step's mean power at SM clock `f_MHz` (busy time only); 0 for a step without busy time.
double step_power_W(const PowerModel& model, const StepWork& work, double f_MHz);

// The clock the step holds: max_sm_clock_MHz where step_power_W there is at most the cap, else the clock in
// [1, max_sm_clock_MHz] where it meets the cap (the power rises with the clock: bisection to 0.01 MHz).
double power_limited_clock_MHz(const PowerModel& model, const StepWork& work);

nlohmann::json power_model_json(const PowerModel& model);
// Throws InputError at the offending path: every key required, each within its physical range.
PowerModel read_power_model(const JsonReader& r);

}  // namespace twin
