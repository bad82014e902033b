// The fitting code of twin calibrate against closed forms: affine fits recover exact lines, model
// conversions invert the profile's formulas, order statistics and interpolation match hand values.
#include <gtest/gtest.h>

#include <cmath>

#include "calibrate/model_fit.hpp"

namespace twin {
namespace {

TEST(FitAffineRelative, RecoversAnExactLineOverManyDecades) {
  std::vector<double> x, t;
  for (double w = 4096; w <= 1.1e9; w *= 2) {
    x.push_back(w);
    t.push_back(12.5 + 0.003 * w);
  }
  const AffineFit fit = fit_affine_relative(x, t);
  EXPECT_NEAR(fit.intercept, 12.5, 1e-6);
  EXPECT_NEAR(fit.slope, 0.003, 1e-12);
}

TEST(FitAffineRelative, ClampsANegativeInterceptToAProportionalFit) {
  // t = -1 + 2x on x = 1, 2: free fit has intercept -1; the proportional fit minimises
  // (s/1 - 1)^2 + (2s/3 - 1)^2 -> s = (1 + 2/3) / (1 + 4/9) = 15/13.
  const AffineFit fit = fit_affine_relative({1, 2}, {1, 3});
  EXPECT_EQ(fit.intercept, 0);
  EXPECT_NEAR(fit.slope, 15.0 / 13.0, 1e-12);
}

TEST(FitAffineRelative, RejectsBadInput) {
  EXPECT_THROW(fit_affine_relative({1}, {1}), std::invalid_argument);
  EXPECT_THROW(fit_affine_relative({1, 2}, {1}), std::invalid_argument);
  EXPECT_THROW(fit_affine_relative({1, 2}, {1, 0}), std::invalid_argument);
}

TEST(GemmEfficiencyFromFit, InvertsTheSaturatingModel) {
  // peak 0.8 of 1000 TFLOP/s, half work 5e9 FLOPs: t(F) = (F + 5e9) / (0.8e15).
  const SaturatingEfficiency eff = gemm_efficiency_from_fit(AffineFit{5e9 / 0.8e15, 1 / 0.8e15}, 1000);
  EXPECT_NEAR(eff.peak, 0.8, 1e-12);
  EXPECT_NEAR(eff.half_work, 5e9, 1e-3);
  const double flops = 2.0 * 4096 * 4096 * 4096;
  EXPECT_NEAR(flops / (1000e12 * eff.at(flops)), (flops + 5e9) / 0.8e15, 1e-15);
}

TEST(LinkProfileFromFit, InvertsTheRingAllReduceTime) {
  // 8 ranks, 450 GB/s nominal, 0.8 peak, 3 us per step: t = 14 * 3 + (2*7/8) S / (450e3 * 0.8) us.
  const double factor = busbw_factor(OpKind::all_reduce, 8);
  const int steps = algorithm_steps(OpKind::all_reduce, 8);
  EXPECT_DOUBLE_EQ(factor, 1.75);
  EXPECT_EQ(steps, 14);
  const LinkProfile link = link_profile_from_fit(AffineFit{42.0, factor / (450e3 * 0.8)}, steps, factor, 450);
  EXPECT_NEAR(link.latency_us, 3.0, 1e-12);
  EXPECT_NEAR(link.bandwidth.peak, 0.8, 1e-12);
  EXPECT_EQ(link.bandwidth.half_work, 0);
}

TEST(BusbwFactor, MatchesNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor(OpKind::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor(OpKind::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(busbw_factor(OpKind::all_to_all, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(OpKind::send, 2), 1.0);
  EXPECT_EQ(algorithm_steps(OpKind::all_gather, 4), 3);
  EXPECT_EQ(algorithm_steps(OpKind::send, 4), 1);
  EXPECT_THROW(busbw_factor(OpKind::gemm, 2), std::invalid_argument);
}

TEST(Percentile, InterpolatesBetweenOrderStatistics) {
  const std::vector<double> samples{5, 1, 4, 2, 3};  // sorted 1..5
  EXPECT_DOUBLE_EQ(percentile(samples, 0.5), 3);
  EXPECT_DOUBLE_EQ(percentile(samples, 0.1), 1.4);   // position 0.4
  EXPECT_DOUBLE_EQ(percentile(samples, 0.9), 4.6);   // position 3.6
  const Measurement m = summarize({10, 30, 20, 40});
  EXPECT_DOUBLE_EQ(m.median_ns, 25);
  EXPECT_DOUBLE_EQ(m.p10_ns, 13);
  EXPECT_EQ(m.samples, 4);
  EXPECT_THROW(percentile({}, 0.5), std::invalid_argument);
}

TEST(InterpolateTime, IsLinearInLogLogSpace) {
  const std::vector<CollectivePoint> points{{1000, 10, 0, 0}, {4000, 40, 0, 0}, {16000, 80, 0, 0}};
  EXPECT_NEAR(interpolate_time_us(points, 2000), 20, 1e-9);           // slope 1 segment
  EXPECT_NEAR(interpolate_time_us(points, 8000), 40 * std::sqrt(2.0), 1e-9);  // slope 1/2 segment
  EXPECT_NEAR(interpolate_time_us(points, 4000), 40, 1e-9);
  EXPECT_NEAR(interpolate_time_us(points, 64000), 160, 1e-9);         // extrapolates the last segment
  EXPECT_NEAR(interpolate_time_us(points, 250), 2.5, 1e-9);           // and the first
}

}  // namespace
}  // namespace twin
