// The SM clock at a moment of a measurement, without touching the GPU's settings: a one-thread kernel
// spins a fixed number of SM cycles, and cycles / its CUPTI duration is the clock it ran at. A GPU held at
// its power limit moves its clock by tens of percent within a second; a GEMM timed across one such swing
// is timed at whatever clock it met, which the probe reports beside it.
#pragma once
#include <cuda_runtime.h>

namespace twin::gpu {

// About 60-150 us at the clocks a Hopper GPU runs: long beside the few microseconds a kernel's start and
// end add to its CUPTI duration, short beside the ~100 ms over which the clock moves.
inline constexpr long long kClockProbeCycles = 200000;

// Enqueues the spinning kernel (1 block, 1 thread) on `stream`.
void launch_clock_probe(cudaStream_t stream);

// The clock in MHz of a probe whose CUPTI record lasted `duration_ns`.
inline double clock_probe_MHz(double duration_ns) { return kClockProbeCycles / duration_ns * 1e3; }

}  // namespace twin::gpu
