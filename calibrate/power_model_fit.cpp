#include "calibrate/power_model_fit.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "cost/measurement_stats.hpp"

namespace twin {
namespace {

// The exponents tried: DVFS puts dynamic energy per operation at ~V(f)^2, with V rising with f over the range a
// Hopper GPU's limiter moves (0 would be energy per operation independent of the clock).
constexpr double kExponentStep = 0.01;
constexpr double kExponentMax = 6;

double scale_at(double f_MHz, double max_MHz, double exponent) { return std::pow(f_MHz / max_MHz, exponent); }

// The model with `exponent`, its static, byte and FLOP energies from the loads (the FLOP one by least squares over
// `gemm_loads`' measured power); `skip`: a load left out (or gemm_loads.size() for none).
PowerModel model_at(double exponent, const std::vector<SustainedClockReading>& gemm_loads, std::size_t skip,
                    const SustainedClockReading& memory, const SustainedClockReading& light) {
  PowerModel m;
  m.static_W = light.power_W;
  m.max_sm_clock_MHz = light.sm_clock_MHz;
  m.power_cap_W = light.power_cap_W;
  m.clock_exponent = exponent;
  const double memory_scale = scale_at(memory.sm_clock_MHz, m.max_sm_clock_MHz, exponent);
  m.pJ_per_byte = std::max(0.0, (memory.power_W - m.static_W) / (memory.bytes_per_s * 1e-12 * memory_scale));
  double xr = 0, xx = 0;
  for (std::size_t i = 0; i < gemm_loads.size(); ++i) {
    if (i == skip) continue;
    const SustainedClockReading& load = gemm_loads[i];
    const double scale = scale_at(load.sm_clock_MHz, m.max_sm_clock_MHz, exponent);
    const double x = scale * load.flops_per_s * 1e-12;
    const double r = load.power_W - m.static_W - scale * m.pJ_per_byte * 1e-12 * load.bytes_per_s;
    xr += x * r, xx += x * x;
  }
  m.pJ_per_flop = std::max(0.0, xr / xx);
  return m;
}

// The model's power for a load at the clock it ran at, with the work it did per second there.
double power_at_measured_clock(const PowerModel& m, const SustainedClockReading& load) {
  return step_power_W(m, work_of(load), load.sm_clock_MHz);
}

// The model whose exponent leaves the kept loads' measured power the least squared error.
PowerModel best_model(const std::vector<SustainedClockReading>& gemm_loads, std::size_t skip,
                      const SustainedClockReading& memory, const SustainedClockReading& light) {
  PowerModel best;
  double best_error = INFINITY;
  for (double exponent = 0; exponent <= kExponentMax + 1e-9; exponent += kExponentStep) {
    const PowerModel m = model_at(exponent, gemm_loads, skip, memory, light);
    double error = 0;
    for (std::size_t i = 0; i < gemm_loads.size(); ++i) {
      if (i == skip) continue;
      const double miss = power_at_measured_clock(m, gemm_loads[i]) - gemm_loads[i].power_W;
      error += miss * miss;
    }
    if (error < best_error) best_error = error, best = m;
  }
  return best;
}

}  // namespace

StepWork work_of(const SustainedClockReading& reading) {
  StepWork work;
  work.reference_sm_clock_MHz = reading.sm_clock_MHz;
  work.clocked_ns = reading.gemm_duty * 1e9;
  work.unclocked_ns = (1 - reading.gemm_duty) * 1e9;
  work.flops = reading.flops_per_s;
  work.bytes = reading.bytes_per_s;
  return work;
}

PowerFitPoint predict_load(const PowerModel& model, const SustainedClockReading& reading, const std::string& label) {
  PowerFitPoint point;
  point.load = label;
  point.gemm_duty = reading.gemm_duty;
  point.power_W = reading.power_W;
  point.measured_MHz = reading.sm_clock_MHz;
  point.fitted_MHz = point.held_out_MHz = power_limited_clock_MHz(model, work_of(reading));
  point.fitted_W = point.held_out_W = power_at_measured_clock(model, reading);
  return point;
}

PowerModelFit fit_power_model(const std::vector<SustainedClockReading>& gemm_loads, const SustainedClockReading& memory,
                              const SustainedClockReading& light) {
  if (gemm_loads.size() < 2) throw std::invalid_argument("power model: fewer than two GEMM loads");
  if (!(light.power_W > 0 && light.power_cap_W > 0 && light.sm_clock_MHz > 0))
    throw std::invalid_argument("power model: no power read under the one-thread load (NVML)");
  if (!(memory.power_W > light.power_W && memory.bytes_per_s > 0))
    throw std::invalid_argument("power model: the memory-only load drew no more than the one-thread load");
  for (const SustainedClockReading& load : gemm_loads)
    if (!(load.power_W > 0 && load.flops_per_s > 0))
      throw std::invalid_argument("power model: a GEMM load without its power or GEMM work");
  PowerModelFit fit;
  fit.model = best_model(gemm_loads, gemm_loads.size(), memory, light);
  for (std::size_t i = 0; i < gemm_loads.size(); ++i) {
    const std::string label = fmt::format("fit: GEMMs at duty {:.3f}, {:.3f} of the time idle SMs",
                                          gemm_loads[i].gemm_duty, gemm_loads[i].idle_share);
    PowerFitPoint point = predict_load(fit.model, gemm_loads[i], label);
    const PowerModel without = best_model(gemm_loads, i, memory, light);
    point.held_out_MHz = power_limited_clock_MHz(without, work_of(gemm_loads[i]));
    point.held_out_W = power_at_measured_clock(without, gemm_loads[i]);
    fit.points.push_back(point);
  }
  return fit;
}

SustainedClockReading median_reading(const std::vector<std::vector<SustainedClockReading>>& per_gpu, std::size_t index) {
  if (per_gpu.empty()) throw std::invalid_argument("median_reading: no GPU's readings");
  const auto median = [&](double SustainedClockReading::*field) {
    std::vector<double> values;
    for (const std::vector<SustainedClockReading>& gpu : per_gpu) values.push_back(gpu.at(index).*field);
    return percentile(values, 0.5);
  };
  SustainedClockReading m;
  for (double SustainedClockReading::*field :
       {&SustainedClockReading::gemm_duty, &SustainedClockReading::sm_clock_MHz,
        &SustainedClockReading::sm_clock_after_memory_MHz, &SustainedClockReading::gemm_tflops,
        &SustainedClockReading::gemm_clock_MHz, &SustainedClockReading::nvml_sm_clock_MHz,
        &SustainedClockReading::power_W, &SustainedClockReading::flops_per_s, &SustainedClockReading::bytes_per_s,
        &SustainedClockReading::power_cap_W, &SustainedClockReading::idle_share})
    m.*field = median(field);
  return m;
}

std::vector<std::string> describe_power_fit(const PowerModelFit& fit) {
  const PowerModel& m = fit.model;
  std::vector<std::string> lines{fmt::format(
      "static {:.1f} W at {:.0f} MHz, {:.4f} pJ/FLOP, {:.2f} pJ/byte, clock exponent {:.2f}, cap {:.0f} W", m.static_W,
      m.max_sm_clock_MHz, m.pJ_per_flop, m.pJ_per_byte, m.clock_exponent, m.power_cap_W)};
  for (const PowerFitPoint& p : fit.points)
    lines.push_back(fmt::format("{}: {:.1f} W at {:.0f} MHz measured; model {:.0f} MHz, {:.1f} W at the measured "
                                "clock; left out {:.0f} MHz, {:.1f} W", p.load, p.power_W, p.measured_MHz,
                                p.fitted_MHz, p.fitted_W, p.held_out_MHz, p.held_out_W));
  return lines;
}

}  // namespace twin
