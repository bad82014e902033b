// clock64() counts the cycles of the SM the thread runs on, at the SM clock.
#include "calibrate/gpu/clock_probe.hpp"

#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

__global__ void spin_for_cycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

void launch_clock_probe(cudaStream_t stream) {
  spin_for_cycles<<<1, 1, 0, stream>>>(kClockProbeCycles);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::gpu
