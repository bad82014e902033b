// Fault injection on the GPU: a kernel that does not finish, as a deadlocked kernel or an NCCL kernel
// waiting for a peer that is gone would not. It ends by itself after a bound, so that a watchdog that
// failed to act cannot leave the GPU busy for good.
#include "gpu/kernels/common.cuh"

namespace twin::kernels {
namespace {

__device__ std::uint64_t global_timer_ns() {
  std::uint64_t now;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(now));
  return now;
}

__global__ void stall_kernel(std::uint64_t seconds) {
  const std::uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < seconds * 1000000000ull) __nanosleep(1000000);
}

}  // namespace

void stall_stream(int seconds, cudaStream_t stream) {
  detail::require(seconds > 0, "stall_stream: seconds must be positive");
  stall_kernel<<<1, 32, 0, stream>>>(static_cast<std::uint64_t>(seconds));
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::kernels
