// Reading a pair between measured points: at the two measured sizes around the collective's bytes, the GEMM curve
// is read at the kernel's waves (log-linear between its two neighbours, clamped at the ends), then the two results are
// read log-linearly in bytes (clamped likewise). Points whose key is not on the grid are read as they are.
#include "cost/interference.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "core/op_kinds.hpp"
#include "cost/attention_waves.hpp"
#include "cost/collective_tables.hpp"
#include "cost/gemm_interpolation_error.hpp"

namespace twin {
namespace {

const char* compute_name(InterferenceCompute c) {
  switch (c) {
    case InterferenceCompute::gemm: return "gemm";
    case InterferenceCompute::memory_bound: return "memory_bound";
  }
  return "?";
}

// Log-linear between (x0, y0) and (x1, y1) at x, clamped to the segment.
double log_lerp(double x, double x0, double y0, double x1, double y1) {
  if (x1 <= x0) return y0;
  const double t = std::clamp((std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0)), 0.0, 1.0);
  return y0 + t * (y1 - y0);
}

// The points of one size read at `gemm_waves` (the memory-bound point as it is). `points` all share size and class,
// in ascending waves.
InterferenceFactors at_waves(const std::vector<const InterferencePoint*>& points, double waves) {
  if (points.size() == 1 || points.front()->beside == InterferenceCompute::memory_bound)
    return {points.front()->compute_slowdown, points.front()->communication_slowdown};
  auto upper = std::find_if(points.begin(), points.end(), [&](const InterferencePoint* p) { return p->gemm_waves >= waves; });
  if (upper == points.begin()) return {points.front()->compute_slowdown, points.front()->communication_slowdown};
  if (upper == points.end()) return {points.back()->compute_slowdown, points.back()->communication_slowdown};
  const InterferencePoint& a = **(upper - 1);
  const InterferencePoint& b = **upper;
  return {log_lerp(waves, a.gemm_waves, a.compute_slowdown, b.gemm_waves, b.compute_slowdown),
          log_lerp(waves, a.gemm_waves, a.communication_slowdown, b.gemm_waves, b.communication_slowdown)};
}

}  // namespace

// Both read the kind's pricing (core/op_kinds.hpp), the one place that says what an op kind is.
std::optional<OpKind> interference_collective(OpKind kind) {
  switch (op_kind_traits(kind).pricing) {
    case OpPricing::collective: return kind;
    case OpPricing::point_to_point: return OpKind::send;  // a send/recv pair, as calibration times it
    case OpPricing::gemm:
    case OpPricing::attention:
    case OpPricing::memory_bound: return std::nullopt;
  }
  return std::nullopt;
}

InterferenceCompute interference_compute(OpKind kind) {
  switch (op_kind_traits(kind).pricing) {
    case OpPricing::gemm:
    case OpPricing::attention: return InterferenceCompute::gemm;
    case OpPricing::memory_bound:
    case OpPricing::collective:
    case OpPricing::point_to_point: return InterferenceCompute::memory_bound;
  }
  return InterferenceCompute::memory_bound;
}

double interference_waves(const Op& op, int sm_count) {
  if (sm_count <= 0) return 0;
  switch (op_kind_traits(op.kind).pricing) {
    case OpPricing::attention: {
      const AttentionShape& a = op.attention;
      const std::int64_t rows = op.kind == OpKind::attention_forward ? a.seq_q : a.seq_kv;
      const double tiles =
          double(a.batch * a.heads) * double((rows + kAttentionTiling.tile_rows - 1) / kAttentionTiling.tile_rows);
      return tiles / (double(sm_count) * kAttentionTiling.tiles_per_sm);
    }
    case OpPricing::gemm: {
      GemmShape one = op.gemm;  // a grouped GEMM runs a kernel per group: each as large as one group
      one.count = 1;
      return gemm_waves(one, sm_count);
    }
    case OpPricing::memory_bound:
    case OpPricing::collective:
    case OpPricing::point_to_point: return 0;
  }
  return 0;
}

std::optional<InterferenceFactors> measured_interference(const std::vector<InterferencePoint>& points,
                                                         OpKind collective, double size_bytes,
                                                         InterferenceCompute beside, double waves) {
  std::map<Bytes, std::vector<const InterferencePoint*>> by_size;  // ascending size, then ascending waves
  for (const InterferencePoint& p : points)
    if (p.collective == collective && p.beside == beside) by_size[p.size_bytes].push_back(&p);
  if (by_size.empty()) return std::nullopt;
  for (auto& [size, row] : by_size)
    std::sort(row.begin(), row.end(), [](const auto* a, const auto* b) { return a->gemm_waves < b->gemm_waves; });
  auto upper = by_size.lower_bound(static_cast<Bytes>(std::ceil(size_bytes)));
  if (upper == by_size.begin()) return at_waves(upper->second, waves);
  if (upper == by_size.end()) return at_waves(std::prev(upper)->second, waves);
  const auto lower = std::prev(upper);
  const InterferenceFactors a = at_waves(lower->second, waves);
  const InterferenceFactors b = at_waves(upper->second, waves);
  const double x0 = static_cast<double>(lower->first), x1 = static_cast<double>(upper->first);
  return InterferenceFactors{log_lerp(size_bytes, x0, a.compute_slowdown, x1, b.compute_slowdown),
                             log_lerp(size_bytes, x0, a.communication_slowdown, x1, b.communication_slowdown)};
}

nlohmann::json interference_points_json(const std::vector<InterferencePoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const InterferencePoint& p : points) {
    nlohmann::json point = {{"collective", to_string(p.collective)}, {"size_bytes", p.size_bytes},
                            {"beside", compute_name(p.beside)}};
    if (p.beside == InterferenceCompute::gemm) point["gemm_waves"] = p.gemm_waves;
    point["compute_slowdown"] = p.compute_slowdown;
    point["communication_slowdown"] = p.communication_slowdown;
    out.push_back(std::move(point));
  }
  return out;
}

std::vector<InterferencePoint> read_interference_points(const JsonReader& array) {
  std::vector<std::string> collectives;
  for (OpKind kind : kMeasuredCollectives) collectives.push_back(to_string(kind));
  const std::vector<std::string> computes = {compute_name(InterferenceCompute::gemm),
                                             compute_name(InterferenceCompute::memory_bound)};
  std::vector<InterferencePoint> points;
  std::map<std::tuple<OpKind, Bytes, InterferenceCompute, double>, bool> seen;
  for (const JsonReader& r : array.elements()) {
    r.only_keys({"collective", "size_bytes", "beside", "gemm_waves", "compute_slowdown", "communication_slowdown"});
    InterferencePoint p;
    const std::string collective = r.required("collective").one_of(collectives, "collective");
    p.collective = kMeasuredCollectives[std::find(collectives.begin(), collectives.end(), collective) - collectives.begin()];
    p.size_bytes = r.required("size_bytes").positive_int64();
    const JsonReader beside = r.required("beside");
    p.beside = beside.one_of(computes, "compute class") == computes[0] ? InterferenceCompute::gemm
                                                                       : InterferenceCompute::memory_bound;
    if (p.beside == InterferenceCompute::gemm) {
      p.gemm_waves = r.required("gemm_waves").positive_number();
    } else if (auto waves = r.find("gemm_waves")) {
      waves->fail("no gemm_waves beside a memory-bound kernel");
    }
    p.compute_slowdown = r.required("compute_slowdown").number(1.0, 100.0, "expected a slowdown >= 1");
    p.communication_slowdown = r.required("communication_slowdown").number(1.0, 100.0, "expected a slowdown >= 1");
    if (!seen.emplace(std::tuple{p.collective, p.size_bytes, p.beside, p.gemm_waves}, true).second)
      r.fail_plain("a second point of this collective, size and compute");
    points.push_back(p);
  }
  return points;
}

}  // namespace twin
