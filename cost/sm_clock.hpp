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
// attention's softmax and its loads of K and V do not all run at the SM clock. Fitted on twelve one-H200 blind
// studies' attention kernels (runs at 1,500-1,700 MHz against calibration's timings at ~1,960 MHz, priced from a grid
// with one, two and four sequences a batch at every head dim), each study held out in turn: held out, attention's
// time per study within 2.2% (forward) and 3.3% (backward) on average, 4.6% / 11.6% at most (docs/ACCURACY.md
// "Attention over batch and heads, and its clock law", 2026-11-30). The first fit (0.43 forward, 0.60 backward, one
// study, 2026-11-29) took its shapes' rate at two and four sequences from a grid of one, and so absorbed the grid's
// error into the law.
inline constexpr double kAttentionForwardClockExponent = 0.76;
inline constexpr double kAttentionBackwardClockExponent = 0.84;

// A soft-capped loss (Gemma-2's final_logit_softcapping: a tanh per logit in each pass) is compute-bound: timed alone
// on one H200 at 64,128 and 262,144 logits it moved 1,050-1,760 GB/s where the plain loss of the same shapes moved
// 3,600-4,240 (2026-12-01, docs/PROFILES.md "The soft-capped loss follows the SM clock"), so its whole time follows the
// SM clock, as a GEMM's. Measured, not fitted: Gemma-2-2B-width steps on one H200 at
// 1,540-1,600 MHz ran their capped losses 1.20-1.33x the times calibration took at ~1,965 MHz, the ratio of the clocks
// (docs/ACCURACY.md "The soft-capped loss follows the SM clock").
inline constexpr double kSoftcappedLossClockExponent = 1;

// The exponent e of time ~ clock^-e by which an op's kernel time follows the SM clock: GEMMs 1 (the cycle law above),
// attention the fitted exponents, a soft-capped loss 1, every other op 0 (memory-bound: they follow HBM, whose clock
// the power limiter leaves alone). The one statement of the law calibration scales timings by and pricing moves
// them by.
double sm_clock_exponent(const Op& op);

// The measurement with median and percentiles scaled to `reference_MHz` (time ~ clock^-exponent); sm_clock_MHz
// keeps the clock it ran at.
Measurement at_sm_clock(const Measurement& measured, double reference_MHz, double exponent = 1);

// Of one shape's rounds, the one whose median at `reference_MHz` is the median (the lower middle for an
// even count), scaled to it. Throws std::invalid_argument when `rounds` is empty.
Measurement median_round_at_sm_clock(const std::vector<Measurement>& rounds, double reference_MHz);

}  // namespace twin
