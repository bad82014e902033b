#include "cost/sustained_clock.hpp"

#include <algorithm>
#include <limits>

namespace twin {

GemmShape sustained_clock_load_gemm(GemmInputs inputs) {
  constexpr std::int64_t kSize = 8192;
  GemmShape shape{kSize, kSize, kSize, 1, false, false};
  shape.inputs = inputs;
  return shape;
}

using nlohmann::json;

namespace {

// `clock_of` of the curve's points at `gemm_duty`: linear between the two points around it, the end point's beyond.
template <typename ClockOf>
double curve_at(const SustainedClockCurve& curve, double gemm_duty, ClockOf clock_of) {
  const std::vector<SustainedClockPoint>& p = curve.points;
  if (p.empty()) return 0;
  if (gemm_duty <= p.front().gemm_duty) return clock_of(p.front());
  for (std::size_t i = 1; i < p.size(); ++i) {
    if (gemm_duty > p[i].gemm_duty) continue;
    const double along = (gemm_duty - p[i - 1].gemm_duty) / (p[i].gemm_duty - p[i - 1].gemm_duty);
    return clock_of(p[i - 1]) + along * (clock_of(p[i]) - clock_of(p[i - 1]));
  }
  return clock_of(p.back());
}

double probe_clock(const SustainedClockPoint& point) { return point.sm_clock_MHz; }
double gemm_clock(const SustainedClockPoint& point) {
  return point.gemm_clock_MHz > 0 ? point.gemm_clock_MHz : point.sm_clock_MHz;
}

}  // namespace

double sustained_clock_MHz_at(const SustainedClockCurve& curve, double gemm_duty) {
  return curve_at(curve, gemm_duty, probe_clock);
}

double gemm_clock_MHz_at(const SustainedClockCurve& curve, double gemm_duty) {
  return curve_at(curve, gemm_duty, gemm_clock);
}

double loaded_gemm_tflops_at(const SustainedClockCurve& curve, double gemm_duty) {
  const bool recorded = std::all_of(curve.points.begin(), curve.points.end(),
                                    [](const SustainedClockPoint& p) { return p.gemm_tflops > 0; });
  return recorded ? curve_at(curve, gemm_duty, [](const SustainedClockPoint& p) { return p.gemm_tflops; }) : 0;
}

StepClock step_clock_at(const SustainedClockCurve& bf16, const SustainedClockCurve& fp8, double gemm_duty,
                        double fp8_share) {
  if (bf16.points.empty()) return {};
  const double bf16_MHz = sustained_clock_MHz_at(bf16, gemm_duty);
  if (fp8.points.empty()) return {bf16_MHz};
  return {(1 - fp8_share) * bf16_MHz + fp8_share * sustained_clock_MHz_at(fp8, gemm_duty)};
}

json sustained_clock_json(const SustainedClockCurve& curve) {
  json points = json::array();
  for (const SustainedClockPoint& point : curve.points) {
    json entry = {{"gemm_duty", point.gemm_duty}, {"sm_clock_MHz", point.sm_clock_MHz}};
    if (!point.gpu_sm_clock_MHz.empty()) entry["gpu_sm_clock_MHz"] = point.gpu_sm_clock_MHz;
    if (point.gemm_tflops > 0) entry["gemm_tflops"] = point.gemm_tflops;
    if (point.gemm_clock_MHz > 0) entry["gemm_clock_MHz"] = point.gemm_clock_MHz;
    if (point.nvml_sm_clock_MHz > 0) entry["nvml_sm_clock_MHz"] = point.nvml_sm_clock_MHz;
    points.push_back(std::move(entry));
  }
  return {{"points", points}};
}

namespace {

double read_clock_MHz(const JsonReader& r) { return r.number(1, 1e5, "expected an SM clock in MHz"); }

SustainedClockPoint read_point(const JsonReader& r) {
  r.only_keys({"gemm_duty", "sm_clock_MHz", "gpu_sm_clock_MHz", "gemm_tflops", "gemm_clock_MHz", "nvml_sm_clock_MHz"});
  SustainedClockPoint point;
  const double tiny = std::numeric_limits<double>::min();
  point.gemm_duty = r.required("gemm_duty").number(tiny, 1, "expected a GEMM duty in (0, 1]");
  point.sm_clock_MHz = read_clock_MHz(r.required("sm_clock_MHz"));
  if (auto clocks = r.find("gpu_sm_clock_MHz"))
    for (const JsonReader& clock : clocks->non_empty_elements()) point.gpu_sm_clock_MHz.push_back(read_clock_MHz(clock));
  if (auto tflops = r.find("gemm_tflops")) point.gemm_tflops = tflops->number(tiny, 1e5, "expected TFLOP/s in (0, 1e5]");
  if (auto clock = r.find("gemm_clock_MHz")) point.gemm_clock_MHz = read_clock_MHz(*clock);
  if (auto clock = r.find("nvml_sm_clock_MHz")) point.nvml_sm_clock_MHz = read_clock_MHz(*clock);
  return point;
}

}  // namespace

SustainedClockCurve read_sustained_clock(const JsonReader& r) {
  r.only_keys({"points"});
  SustainedClockCurve curve;
  for (const JsonReader& entry : r.required("points").non_empty_elements()) {
    SustainedClockPoint point = read_point(entry);
    if (!curve.points.empty() && point.gemm_duty <= curve.points.back().gemm_duty)
      entry.required("gemm_duty").fail("expected duties in ascending order, each once");
    curve.points.push_back(std::move(point));
  }
  return curve;
}

}  // namespace twin
