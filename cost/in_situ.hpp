// What a training step does to benchmark times, learnt from traced runs: a kernel in a training step runs
// at other clocks and with other data in the caches than the same kernel repeated in a micro-benchmark
// (measured on H200: GEMMs about 9% faster, attention 4 to 24% slower, memory-bound kernels 5 to 10%
// slower; docs/ACCURACY.md). Each shape a trace measured carries its ratio measured / priced; a shape no
// trace measured inherits the ratios of the traced shapes near it, fading to 1 with distance, so that a
// run informs the shapes near what it ran and leaves far ones (another model's) alone.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cost/profile.hpp"
#include "core/op.hpp"

namespace twin {

// The trace entries of `kernels.measured` with a price (Measurement::priced_ns), in key order. An entry that states its
// run's clock (Measurement::run_sm_clock_MHz, a profile with a reference clock) keeps its ratio without the clock's
// part, (reference / run clock)^e with e = priced_sm_clock_exponent: clock_free, so that a step near it applies its
// own clock, not the run's (a model whose GEMM duty holds another clock learns the kernels' rest, not the clock).
std::vector<TraceShape> index_trace_shapes(const GpuKernelProfile& kernels);

// How many traced shapes a ratio is taken from, and the distance (octaves) at which one traced shape
// counts as much as the benchmark price left alone (ratio 1).
inline constexpr int kInSituNeighbours = 4;
inline constexpr double kInSituReachOctaves = 1.0;

// exp((w_0 log r_0 + sum_i w_i log r_i) / (w_0 + sum_i w_i)) over the kInSituNeighbours nearest traced
// shapes of op's kind and variant (cost/shape_space.hpp), w_i = 1 / d_i^2 and w_0 = 1 /
// kInSituReachOctaves^2: one traced shape half an octave away carries 80% of its log ratio, two octaves away
// 20%; the rest is the prior r_0 (the profile's InSituPrior for the kind and the step's clock). r_0 when none
// is comparable. A clock_free shape's r_i is its ratio times `step_clock_ratio` (the step's clock's part of r_0).
double in_situ_ratio(const std::vector<TraceShape>& traced, const Op& op, double prior_ratio = 1.0,
                     double step_clock_ratio = 1.0);

}  // namespace twin
