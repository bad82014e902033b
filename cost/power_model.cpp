#include "cost/power_model.hpp"

#include <cmath>

namespace twin {

using nlohmann::json;

double step_power_W(const PowerModel& model, const StepWork& work, double f_MHz) {
  const double busy_ns = work.clocked_ns * work.reference_sm_clock_MHz / f_MHz + work.unclocked_ns;
  if (!(busy_ns > 0)) return 0;
  const double flops_per_s = work.flops / (busy_ns * 1e-9), bytes_per_s = work.bytes / (busy_ns * 1e-9);
  const double voltage_scale = std::pow(f_MHz / model.max_sm_clock_MHz, model.clock_exponent);
  return model.static_W +
         voltage_scale * (model.pJ_per_flop * 1e-12 * flops_per_s + model.pJ_per_byte * 1e-12 * bytes_per_s);
}

double power_limited_clock_MHz(const PowerModel& model, const StepWork& work) {
  double high = model.max_sm_clock_MHz;
  if (step_power_W(model, work, high) <= model.power_cap_W) return high;
  double low = 1;
  if (step_power_W(model, work, low) >= model.power_cap_W) return low;  // the cap under the static draw
  while (high - low > 0.01) {
    const double mid = (low + high) / 2;
    (step_power_W(model, work, mid) > model.power_cap_W ? high : low) = mid;
  }
  return (low + high) / 2;
}

json power_model_json(const PowerModel& model) {
  return {{"static_W", model.static_W},         {"pJ_per_flop", model.pJ_per_flop},
          {"pJ_per_byte", model.pJ_per_byte},   {"clock_exponent", model.clock_exponent},
          {"max_sm_clock_MHz", model.max_sm_clock_MHz}, {"power_cap_W", model.power_cap_W}};
}

PowerModel read_power_model(const JsonReader& r) {
  r.only_keys({"static_W", "pJ_per_flop", "pJ_per_byte", "clock_exponent", "max_sm_clock_MHz", "power_cap_W"});
  PowerModel model;
  model.static_W = r.required("static_W").number(0, 1e4, "expected a power in W in [0, 1e4]");
  model.pJ_per_flop = r.required("pJ_per_flop").number(0, 1e3, "expected an energy per FLOP in pJ in [0, 1e3]");
  model.pJ_per_byte = r.required("pJ_per_byte").number(0, 1e4, "expected an energy per byte in pJ in [0, 1e4]");
  model.clock_exponent = r.required("clock_exponent").number(0, 10, "expected an exponent in [0, 10]");
  model.max_sm_clock_MHz = r.required("max_sm_clock_MHz").number(1, 1e5, "expected an SM clock in MHz");
  model.power_cap_W = r.required("power_cap_W").number(1, 1e4, "expected a power limit in W in [1, 1e4]");
  if (!(model.power_cap_W > model.static_W))
    r.required("power_cap_W").fail("expected a power limit above static_W (the GPU could not run at all)");
  return model;
}

}  // namespace twin
