// Fitting measured times to the profile's models (pure C++, no GPU, so that CPU tests and imports use it
// too): an affine time model fitted by least squares on relative error, and its conversion to
// SaturatingEfficiency and LinkProfile. Sample statistics and step counts live with pricing (cost/).
#pragma once
#include <vector>

#include "cost/collective_steps.hpp"
#include "cost/measurement_stats.hpp"
#include "cost/profile.hpp"

namespace twin {

// time = intercept + slope * work. Both models of profile.hpp reduce to this form: a GEMM of F FLOPs
// under eff(F) = peak F / (F + half) takes (F + half) / (P peak); a collective takes
// steps * latency + factor S / (B peak).
struct AffineFit {
  double intercept = 0;
  double slope = 0;
  double at(double work) const { return intercept + slope * work; }
};

// Minimises sum(((intercept + slope x) - t) / t)^2, so that 4 KiB and 1 GiB points weigh alike.
// The intercept is kept >= 0 (refitting the slope alone when the free fit goes negative).
// Throws std::invalid_argument for fewer than 2 points, sizes that differ, or non-positive times.
AffineFit fit_affine_relative(const std::vector<double>& work, const std::vector<double>& time);

// A GEMM model from its affine fit in seconds per FLOP: peak = 1 / (slope P), half_work = intercept / slope.
SaturatingEfficiency gemm_efficiency_from_fit(const AffineFit& seconds_per_flop, double peak_tflops);

// A collective's link model from its affine fit of time_us over algorithm bytes S:
// latency_us = intercept / steps, bandwidth.peak = factor / (slope * nominal), half_work = 0 (the affine
// model cannot tell a per-step latency from a bandwidth half-work: both are a constant term).
LinkProfile link_profile_from_fit(const AffineFit& time_us_per_byte, int steps, double busbw_factor,
                                  double nominal_bandwidth_GBps);

}  // namespace twin
