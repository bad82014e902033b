// Nearest neighbours by a linear scan (a profile holds a few thousand GEMMs and the simulator prices each
// distinct shape once); ties in distance keep the earlier key so the prediction is deterministic.
// Why inverse-distance weights of the 8 nearest, isotropic in octaves: on the 1372 GEMMs of a calibrated
// H200 (powers of two, four layouts), leave-one-out over its 287 untransposed shapes of at least 2^31
// FLOPs gave a mean error of 2.1% (p90 5.1%); local linear regression on the 8 to 27 nearest gave 3.8-4.4%
// (p90 8.3-8.6%): it extrapolates the measurement noise and kernel-choice jumps that a convex
// combination only averages.
// Variants tried on the same data (4 or 12 neighbours, weights 1/d^3, k's octaves counted 0.5 or 1.5
// times, another layout 0.25 to 1 octave away) were none better in both the mean and the worst case.
#include "calibrate/gemm_predictor.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "calibrate/shape_space.hpp"

namespace twin {
namespace {

// Reads "name=<integer>" at `text` and advances past it and one following ','.
bool read_field(std::string_view& text, std::string_view name, std::int64_t& value) {
  if (text.substr(0, name.size()) != name || text.size() <= name.size() || text[name.size()] != '=') return false;
  text.remove_prefix(name.size() + 1);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc()) return false;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  if (!text.empty() && text.front() == ',') text.remove_prefix(1);
  return true;
}

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

}  // namespace

std::optional<GemmShape> gemm_shape_from_key(std::string_view key) {
  constexpr std::string_view prefix = "gemm:";
  if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
  key.remove_prefix(prefix.size());
  std::int64_t m, n, k, count, ta, tb;
  if (!read_field(key, "m", m) || !read_field(key, "n", n) || !read_field(key, "k", k) ||
      !read_field(key, "count", count) || !read_field(key, "ta", ta) || !read_field(key, "tb", tb) || !key.empty())
    return std::nullopt;
  if (m < 1 || n < 1 || k < 1 || count < 1 || count > INT32_MAX || (ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return std::nullopt;
  return GemmShape{m, n, k, static_cast<std::int32_t>(count), ta == 1, tb == 1};
}

std::vector<MeasuredGemm> index_measured_gemms(const std::map<std::string, Measurement>& measured) {
  std::vector<MeasuredGemm> out;
  for (const auto& [key, m] : measured)
    if (auto shape = gemm_shape_from_key(key); shape && benchmark_time_ns(m) > 0)
      out.push_back({*shape, benchmark_time_ns(m)});
  return out;
}

double predict_gemm_time_ns(const std::vector<MeasuredGemm>& measured, const GemmShape& shape,
                            const std::function<double(const GemmShape&)>& model_ns) {
  if (measured.empty()) throw std::invalid_argument("predict_gemm_time_ns: no measured GEMMs");
  const Octaves query(shape);
  std::vector<std::pair<double, std::size_t>> by_distance;
  by_distance.reserve(measured.size());
  for (std::size_t i = 0; i < measured.size(); ++i)
    by_distance.emplace_back(squared_distance(query, shape, measured[i].shape), i);
  const auto ratio = interpolate_log_ratio(std::move(by_distance), kGemmNeighbours, 0, [&](std::size_t i) {
    return std::log(measured[i].time_ns / model_ns(measured[i].shape));
  });
  if (ratio->exact) return measured[*ratio->exact].time_ns;
  return model_ns(shape) * std::exp(ratio->log_ratio);
}

}  // namespace twin
