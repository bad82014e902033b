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
// `curve`); `skip`: a curve point left out (or curve.size() for none).
PowerModel model_at(double exponent, const std::vector<SustainedClockReading>& curve, std::size_t skip,
                    const SustainedClockReading& memory, const SustainedClockReading& light) {
  PowerModel m;
  m.static_W = light.power_W;
  m.max_sm_clock_MHz = light.sm_clock_MHz;
  m.power_cap_W = light.power_cap_W;
  m.clock_exponent = exponent;
  const double memory_scale = scale_at(memory.sm_clock_MHz, m.max_sm_clock_MHz, exponent);
  m.pJ_per_byte = std::max(0.0, (memory.power_W - m.static_W) / (memory.bytes_per_s * 1e-12 * memory_scale));
  double xr = 0, xx = 0;
  for (std::size_t i = 0; i < curve.size(); ++i) {
    if (i == skip) continue;
    const double scale = scale_at(curve[i].sm_clock_MHz, m.max_sm_clock_MHz, exponent);
    const double x = scale * curve[i].flops_per_s * 1e-12;
    const double r = curve[i].power_W - m.static_W - scale * m.pJ_per_byte * 1e-12 * curve[i].bytes_per_s;
    xr += x * r, xx += x * x;
  }
  m.pJ_per_flop = std::max(0.0, xr / xx);
  return m;
}

// The model whose exponent puts the kept curve points' clocks nearest the measured ones (squared MHz).
PowerModel best_model(const std::vector<SustainedClockReading>& curve, std::size_t skip,
                      const SustainedClockReading& memory, const SustainedClockReading& light) {
  PowerModel best;
  double best_error = INFINITY;
  for (double exponent = 0; exponent <= kExponentMax + 1e-9; exponent += kExponentStep) {
    const PowerModel m = model_at(exponent, curve, skip, memory, light);
    double error = 0;
    for (std::size_t i = 0; i < curve.size(); ++i) {
      if (i == skip) continue;
      const double miss = power_limited_clock_MHz(m, work_of(curve[i])) - curve[i].sm_clock_MHz;
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

PowerModelFit fit_power_model(const std::vector<SustainedClockReading>& curve, const SustainedClockReading& memory,
                              const SustainedClockReading& light) {
  if (curve.size() < 2) throw std::invalid_argument("power model: fewer than two loads at the cap");
  if (!(light.power_W > 0 && light.power_cap_W > 0 && light.sm_clock_MHz > 0))
    throw std::invalid_argument("power model: no power read under the one-thread load (NVML)");
  if (!(memory.power_W > light.power_W && memory.bytes_per_s > 0))
    throw std::invalid_argument("power model: the memory-only load drew no more than the one-thread load");
  for (const SustainedClockReading& point : curve)
    if (!(point.power_W > 0 && point.flops_per_s > 0))
      throw std::invalid_argument("power model: a curve load without its power or GEMM work");
  PowerModelFit fit;
  fit.model = best_model(curve, curve.size(), memory, light);
  for (std::size_t i = 0; i < curve.size(); ++i) {
    PowerFitPoint point;
    point.gemm_duty = curve[i].gemm_duty;
    point.power_W = curve[i].power_W;
    point.measured_MHz = curve[i].sm_clock_MHz;
    point.fitted_MHz = power_limited_clock_MHz(fit.model, work_of(curve[i]));
    point.held_out_MHz = power_limited_clock_MHz(best_model(curve, i, memory, light), work_of(curve[i]));
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
        &SustainedClockReading::gemm_clock_MHz, &SustainedClockReading::power_W, &SustainedClockReading::flops_per_s,
        &SustainedClockReading::bytes_per_s, &SustainedClockReading::power_cap_W})
    m.*field = median(field);
  return m;
}

std::vector<std::string> describe_power_fit(const PowerModelFit& fit) {
  const PowerModel& m = fit.model;
  std::vector<std::string> lines{fmt::format(
      "static {:.1f} W at {:.0f} MHz, {:.4f} pJ/FLOP, {:.2f} pJ/byte, clock exponent {:.2f}, cap {:.0f} W", m.static_W,
      m.max_sm_clock_MHz, m.pJ_per_flop, m.pJ_per_byte, m.clock_exponent, m.power_cap_W)};
  for (const PowerFitPoint& p : fit.points)
    lines.push_back(fmt::format("duty {:.3f}: {:.1f} W, {:.0f} MHz measured, {:.0f} fitted, {:.0f} held out", p.gemm_duty,
                                p.power_W, p.measured_MHz, p.fitted_MHz, p.held_out_MHz));
  return lines;
}

}  // namespace twin
