// E[max of n] = integral of x n phi(x) Phi(x)^(n-1) over x: Simpson's rule on [-12, 12], where the integrand of
// any n up to millions of ranks has decayed below double precision at both ends.
#include "sim/rank_drift.hpp"

#include <cmath>
#include <numbers>

namespace twin::sim {

double expected_max_of_normals(int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  const auto integrand = [n](double x) {
    const double density = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
    const double below = 0.5 * std::erfc(-x / std::numbers::sqrt2);
    return below <= 0 ? 0.0 : x * n * density * std::exp((n - 1) * std::log(below));
  };
  constexpr int kSteps = 4800;  // even
  constexpr double kFrom = -12, kTo = 12, kStep = (kTo - kFrom) / kSteps;
  double sum = integrand(kFrom) + integrand(kTo);
  for (int i = 1; i < kSteps; ++i) sum += (i % 2 ? 4 : 2) * integrand(kFrom + i * kStep);
  return sum * kStep / 3;
}

TimeNs expected_lateness_ns(const RankDrift& drift, double max_of_n, TimeNs drift_ns) {
  const double wait_ns = max_of_n * (drift.fixed_ns + drift.rate * static_cast<double>(drift_ns));
  return static_cast<TimeNs>(std::ceil(wait_ns));
}

TimeNs collective_arrival_wait_ns(const FlatClass& flat, std::uint32_t i, TimeNs compute_ns,
                                  std::array<TimeNs, kGroupKindCount>& aligned_ns) {
  const FlatOp& op = flat.ops[i];
  const double max_of_n = flat.drift_max_of_n[static_cast<int>(op.group)];
  if (max_of_n <= 0 || op.kind != OpClass::collective) return 0;
  TimeNs& aligned = aligned_ns[static_cast<int>(op.group)];
  const TimeNs wait_ns = expected_lateness_ns(flat.drift, max_of_n, compute_ns - aligned);
  for (std::uint32_t s = op.successors_begin; s < op.successors_end; ++s)
    if (flat.ops[flat.successors[s]].kind == OpClass::compute) {
      aligned = compute_ns;  // the compute waits on the result, which every rank receives together
      break;
    }
  return wait_ns;
}

}  // namespace twin::sim
