// The sum through device memory: NCCL reduces device buffers only.
#include "executor/gpu/world_sum.hpp"

#include <string>

#include <fmt/format.h>

#include "gpu/checks.hpp"

namespace twin::exec {

WorldSum::WorldSum(Communicators& comms, Watchdog& watchdog, int rank)
    : comms_(comms), watchdog_(watchdog), rank_(rank) {
  TWIN_CUDA_CHECK(cudaMalloc(&device_, sizeof(float)));
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming));
}

WorldSum::~WorldSum() {
  cudaEventDestroy(summed_);
  cudaFree(device_);
  cudaStreamDestroy(side_);
}

float WorldSum::operator()(float value) {
  watchdog_.arm(fmt::format("rank {}", rank_), [] { return std::string("the loss all-reduce over all ranks"); });
  TWIN_CUDA_CHECK(cudaMemcpyAsync(device_, &value, sizeof(float), cudaMemcpyHostToDevice, side_));
  TWIN_NCCL_CHECK(ncclAllReduce(device_, device_, 1, ncclFloat32, ncclSum, comms_.world(), side_));
  TWIN_CUDA_CHECK(cudaMemcpyAsync(&value, device_, sizeof(float), cudaMemcpyDeviceToHost, side_));
  TWIN_CUDA_CHECK(cudaEventRecord(summed_, side_));
  TWIN_CUDA_CHECK(cudaEventSynchronize(summed_));
  watchdog_.disarm();
  return value;
}

}  // namespace twin::exec
