// The Philox seed and offset cuDNN's RNG node (gpu/attention.cpp's dropout) reads from device memory.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace twin::gpu {

// device[0] = seed, device[1] = offset, written on `stream` by a one-thread kernel: stream-ordered before the graph
// that reads them, with no host synchronisation (a copy from pageable memory may synchronise with the stream).
void write_rng_state(std::int64_t* device, std::int64_t seed, std::int64_t offset, cudaStream_t stream);

}  // namespace twin::gpu
