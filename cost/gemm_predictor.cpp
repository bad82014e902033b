// Nearest neighbours by a linear scan (a profile holds a few thousand GEMMs and the simulator prices each
// distinct shape once); ties in distance keep the earlier key so the prediction is deterministic.
// Why inverse-distance weights of the 8 nearest, isotropic in octaves: on the 1372 GEMMs of a calibrated
// H200 (powers of two, four layouts), leave-one-out over its 287 untransposed shapes of at least 2^31
// FLOPs gave a mean error of 2.1% (p90 5.1%); local linear regression on the 8 to 27 nearest gave 3.8-4.4%
// (p90 8.3-8.6%): it extrapolates the measurement noise and kernel-choice jumps that a convex
// combination only averages.
// Variants tried on the same data (4 or 12 neighbours, weights 1/d^3, k's octaves counted 0.5 or 1.5
// times, another layout 0.25 to 1 octave away) were none better in both the mean and the worst case.
// Why the model carries gemm_tile_work_factor: on a clock-scaled H200 calibration (2026-11-23, docs/
// PERFORMANCE.md), 58 shapes swept between grid sizes were 49 within 5% without it (mean 2.97%, worst
// 19.4%) and 56 with it (mean 1.72%, worst 13.0%), leave-one-out over the grid's 1827 untransposed shapes
// unchanged (mean 2.8%, p90 6.3%). Counting waves below one full wave made leave-one-out worse (3.8%),
// and so did the tiles CUPTI named in one orientation only (3.2%).
#include "cost/gemm_predictor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cost/shape_space.hpp"

namespace twin {
namespace {

// A shape's position in octaves: (log2 m, log2 n, log2 k, log2 count).
struct Octaves {
  double m, n, k, count;
  explicit Octaves(const GemmShape& s)
      : m(std::log2(double(s.m))), n(std::log2(double(s.n))), k(std::log2(double(s.k))), count(std::log2(double(s.count))) {}
};

double squared_distance(const Octaves& a, const GemmShape& a_shape, const GemmShape& b) {
  const Octaves o(b);
  const double dm = a.m - o.m, dn = a.n - o.n, dk = a.k - o.k, dc = a.count - o.count;
  const bool same_layout = a_shape.transpose_a == b.transpose_a && a_shape.transpose_b == b.transpose_b;
  const double dl = same_layout ? 0 : kGemmLayoutDistance;
  return dm * dm + dn * dn + dk * dk + dc * dc + dl * dl;
}

std::vector<std::pair<double, std::size_t>> by_distance_to(const std::vector<MeasuredGemm>& measured,
                                                          const GemmShape& shape) {
  const Octaves query(shape);
  std::vector<std::pair<double, std::size_t>> by_distance;
  by_distance.reserve(measured.size());
  for (std::size_t i = 0; i < measured.size(); ++i)
    by_distance.emplace_back(squared_distance(query, shape, measured[i].shape), i);
  return by_distance;
}

}  // namespace

std::optional<GemmShape> gemm_shape_from_key(std::string_view key) {
  const std::optional<Op> op = op_from_kernel_key(key);
  // A GEMM with a residual in its epilogue, or one adding to (or writing) a gradient buffer, is not a neighbour of
  // plain ones: its time includes the bytes beyond the product's.
  if (!op || op->kind != OpKind::gemm || op->fuses_residual || op->gemm_output != GemmOutput::written)
    return std::nullopt;
  const GemmShape& g = op->gemm;
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.count < 1) return std::nullopt;
  return g;
}

std::vector<MeasuredGemm> index_measured_gemms(const std::map<std::string, Measurement>& measured, bool fp8) {
  std::vector<MeasuredGemm> out;
  for (const auto& [key, m] : measured)
    if (auto shape = gemm_shape_from_key(key); shape && is_fp8(*shape) == fp8 && benchmark_time_ns(m) > 0)
      out.push_back({*shape, benchmark_time_ns(m)});
  return out;
}

std::vector<std::size_t> nearest_measured_gemms(const std::vector<MeasuredGemm>& measured, const GemmShape& shape,
                                                std::size_t count) {
  auto by_distance = by_distance_to(measured, shape);
  const std::size_t used = std::min(count, by_distance.size());
  std::partial_sort(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(used), by_distance.end());
  std::vector<std::size_t> nearest;
  for (std::size_t j = 0; j < used; ++j) nearest.push_back(by_distance[j].second);
  return nearest;
}

double gemm_tile_work_factor(const GemmShape& shape, int sm_count) {
  double best = std::numeric_limits<double>::infinity();
  const double useful = double(shape.m) * double(shape.n);
  for (const auto& [rows, columns] : kGemmTiles) {
    const std::int64_t tiles = ((shape.m + rows - 1) / rows) * ((shape.n + columns - 1) / columns) * shape.count;
    double work = double(tiles) * double(rows * columns) / (useful * shape.count);
    const double waves = double(tiles) / sm_count;
    if (sm_count > 0 && waves >= 1) work *= std::ceil(waves) / waves;
    best = std::min(best, work);
  }
  return best;
}

double predict_gemm_time_ns(const std::vector<MeasuredGemm>& measured, const GemmShape& shape,
                            const std::function<double(const GemmShape&)>& model_ns) {
  if (measured.empty()) throw std::invalid_argument("predict_gemm_time_ns: no measured GEMMs");
  const auto ratio = interpolate_log_ratio(by_distance_to(measured, shape), kGemmNeighbours, 0, [&](std::size_t i) {
    return std::log(measured[i].time_ns / model_ns(measured[i].shape));
  });
  if (ratio->exact) return measured[*ratio->exact].time_ns;
  return model_ns(shape) * std::exp(ratio->log_ratio);
}

}  // namespace twin
