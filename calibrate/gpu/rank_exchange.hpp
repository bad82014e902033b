// Small exchanges between the ranks of a calibration over their NCCL communicator: what each rank found (its
// host, its free memory, its GEMM timings) gathered in rank order.
#pragma once
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "gpu/checks.hpp"
#include "gpu/device_buffer.hpp"

namespace twin::gpu {

// All-gathers `count` values of a trivially copyable T per rank (every rank gives the same count), rank order.
template <typename T>
std::vector<T> all_gather_values(ncclComm_t world, int world_size, const T* mine, std::size_t count) {
  const std::size_t bytes = sizeof(T) * count;
  DeviceBuffer send(bytes), recv(bytes * world_size);
  std::vector<T> out(count * world_size);
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Copies on the collective's own stream: a non-blocking stream does not wait for cudaMemcpy's DMA from pageable
  // memory, and NCCL read half-copied values that way (seen on four H200s, 2026-11-28: zero GEMM times).
  TWIN_CUDA_CHECK(cudaMemcpyAsync(send.data(), mine, bytes, cudaMemcpyHostToDevice, stream));
  TWIN_NCCL_CHECK(ncclAllGather(send.data(), recv.data(), bytes, ncclUint8, world, stream));
  TWIN_CUDA_CHECK(cudaMemcpyAsync(out.data(), recv.data(), bytes * world_size, cudaMemcpyDeviceToHost, stream));
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return out;
}

template <typename T>
std::vector<T> all_gather_values(ncclComm_t world, int world_size, const T& mine) {
  return all_gather_values(world, world_size, &mine, 1);
}

}  // namespace twin::gpu
