// The power model's calibration on one GPU alone: the BF16 sustained-clock load with its power and the two power
// loads (calibrate/gpu/sustained_clock.hpp measure_sustained_clock, as `twin calibrate` runs them), then the fit
// (calibrate/power_model_fit.hpp), printed as JSON: {"readings": [...], "power_model": {...}, "fit": [...]}. The same
// functions `twin calibrate --sustained-clock` calls, without NCCL or a profile: for a device check made while
// twin-gpu was not built (2026-11-29, docs/ACCURACY.md "The power model"). Not part of the CMake build; its link
// line is in tests/gpu/power_loads/build.sh.
#include <cstdio>
#include <exception>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/gpu/sustained_clock.hpp"
#include "calibrate/power_model_fit.hpp"

int main() {
  try {
    using namespace twin;
    const gpu::SustainedClockLoad load;
    const std::vector<SustainedClockReading> readings = gpu::measure_sustained_clock(load);
    nlohmann::json out = {{"readings", nlohmann::json::array()}};
    for (const SustainedClockReading& r : readings)
      out["readings"].push_back({{"gemm_duty", r.gemm_duty}, {"sm_clock_MHz", r.sm_clock_MHz},
                                 {"sm_clock_after_memory_MHz", r.sm_clock_after_memory_MHz},
                                 {"gemm_tflops", r.gemm_tflops}, {"power_W", r.power_W},
                                 {"flops_per_s", r.flops_per_s}, {"bytes_per_s", r.bytes_per_s},
                                 {"power_cap_W", r.power_cap_W}});
    const std::size_t duties = load.gemm_duties.size();
    const std::vector<SustainedClockReading> curve(readings.begin(), readings.begin() + duties);
    const PowerModelFit fit = fit_power_model(curve, readings.at(duties), readings.at(duties + 1));
    out["power_model"] = power_model_json(fit.model);
    for (const PowerFitPoint& p : fit.points)
      out["fit"].push_back({{"gemm_duty", p.gemm_duty}, {"power_W", p.power_W}, {"measured_MHz", p.measured_MHz},
                            {"fitted_MHz", p.fitted_MHz}, {"held_out_MHz", p.held_out_MHz}});
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "power_loads: %s\n", e.what());
    return 1;
  }
}
