// GEMM times at one SM clock. A GPU at its power limit swings its SM clock by tens of percent within a
// second, and a GEMM's time moves with it (on an H200, time ~ clock^-0.91 over three rounds of 116 shapes):
// one timing is a draw from that swing. Scaled to a reference clock, times measured at different moments
// compare; the reference is the median clock of the calibration, the clock its hot GPU typically ran at.
#pragma once
#include <vector>

#include "cost/profile.hpp"

namespace twin {

// The median of the recorded clocks (sm_clock_MHz > 0); 0 when none is recorded.
double median_sm_clock_MHz(const std::vector<Measurement>& measurements);

// `time_ns` measured at `clock_MHz`, as it would run at `reference_MHz`: time * clock / reference (a GEMM
// counted in SM cycles). Unchanged when either clock is 0 (not recorded).
double time_at_sm_clock_ns(double time_ns, double clock_MHz, double reference_MHz);

// The same with time ~ clock^-exponent: (clock / reference)^exponent.
double time_at_sm_clock_ns(double time_ns, double clock_MHz, double reference_MHz, double exponent);

// How much of an attention kernel's time follows the SM clock, as an exponent of clock^-e (a GEMM's: 1). Flash
// attention's softmax and its loads of K and V do not all run at the SM clock. Fitted on one blind study's attention
// kernels (Qwen2.5-14B widths on one H200, nine runs at 1,450-1,520 MHz against calibration's timings at ~1,960
// MHz, 2026-11-29), held out on four other studies' (two models on one and on four H200s): docs/ACCURACY.md,
// "Attention at the training clock".
inline constexpr double kAttentionForwardClockExponent = 0.43;
inline constexpr double kAttentionBackwardClockExponent = 0.60;

// The exponent e of time ~ clock^-e by which a kind's kernel time follows the SM clock: GEMMs 1 (the cycle law
// above), attention the fitted exponents, every other kind 0 (memory-bound: they follow HBM, whose clock the
// power limiter leaves alone). The one statement of the law calibration scales timings by and pricing moves them by.
double sm_clock_exponent(OpKind kind);

// The measurement with median and percentiles scaled to `reference_MHz` (time ~ clock^-exponent); sm_clock_MHz
// keeps the clock it ran at.
Measurement at_sm_clock(const Measurement& measured, double reference_MHz, double exponent = 1);

// Of one shape's rounds, the one whose median at `reference_MHz` is the median (the lower middle for an
// even count), scaled to it. Throws std::invalid_argument when `rounds` is empty.
Measurement median_round_at_sm_clock(const std::vector<Measurement>& rounds, double reference_MHz);

}  // namespace twin
