// Time scales as 1/clock (exponent 1, not the fitted 0.91): a GEMM's time in cycles is a quantity a reader
// can check, and over the +-10% the clock swings the two differ by under 1%.
#include "cost/sm_clock.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cost/measurement_stats.hpp"

namespace twin {

double median_sm_clock_MHz(const std::vector<Measurement>& measurements) {
  std::vector<double> clocks;
  for (const Measurement& m : measurements)
    if (m.sm_clock_MHz > 0) clocks.push_back(m.sm_clock_MHz);
  return clocks.empty() ? 0 : percentile(std::move(clocks), 0.5);
}

double time_at_sm_clock_ns(double time_ns, double clock_MHz, double reference_MHz) {
  if (clock_MHz <= 0 || reference_MHz <= 0) return time_ns;
  return time_ns * clock_MHz / reference_MHz;
}

double time_at_sm_clock_ns(double time_ns, double clock_MHz, double reference_MHz, double exponent) {
  if (clock_MHz <= 0 || reference_MHz <= 0) return time_ns;
  return time_ns * std::pow(clock_MHz / reference_MHz, exponent);
}

double sm_clock_exponent(const Op& op) {
  if (op.kind == OpKind::gemm) return 1;
  if (op.kind == OpKind::attention_forward) return kAttentionForwardClockExponent;
  if (op.kind == OpKind::attention_backward) return kAttentionBackwardClockExponent;
  const bool loss = op.kind == OpKind::loss_forward || op.kind == OpKind::loss_backward;
  if (loss && op.softcapped_logits) return kSoftcappedLossClockExponent;
  return 0;
}

Measurement at_sm_clock(const Measurement& measured, double reference_MHz, double exponent) {
  Measurement scaled = measured;
  scaled.median_ns = time_at_sm_clock_ns(measured.median_ns, measured.sm_clock_MHz, reference_MHz, exponent);
  scaled.p10_ns = time_at_sm_clock_ns(measured.p10_ns, measured.sm_clock_MHz, reference_MHz, exponent);
  scaled.p90_ns = time_at_sm_clock_ns(measured.p90_ns, measured.sm_clock_MHz, reference_MHz, exponent);
  return scaled;
}

Measurement median_round_at_sm_clock(const std::vector<Measurement>& rounds, double reference_MHz) {
  if (rounds.empty()) throw std::invalid_argument("median_round_at_sm_clock: no rounds");
  std::vector<Measurement> scaled;
  for (const Measurement& round : rounds) scaled.push_back(at_sm_clock(round, reference_MHz));
  std::stable_sort(scaled.begin(), scaled.end(),
                   [](const Measurement& a, const Measurement& b) { return a.median_ns < b.median_ns; });
  return scaled[(scaled.size() - 1) / 2];
}

}  // namespace twin
