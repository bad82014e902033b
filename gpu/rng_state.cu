#include "gpu/rng_state.hpp"

#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

__global__ void write_pair(std::int64_t* device, std::int64_t seed, std::int64_t offset) {
  device[0] = seed;
  device[1] = offset;
}

}  // namespace

void write_rng_state(std::int64_t* device, std::int64_t seed, std::int64_t offset, cudaStream_t stream) {
  write_pair<<<1, 1, 0, stream>>>(device, seed, offset);
  TWIN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace twin::gpu
