// Device allocations and the random-fill kernels (splitmix64 of seed + index, one value per thread).
#include "gpu/device_buffer.hpp"

#include <cuda_bf16.h>

#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

__device__ float uniform_from_hash(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void fill_bf16_kernel(__nv_bfloat16* data, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = __float2bfloat16(uniform_from_hash(seed, i));
}

__global__ void fill_f32_kernel(float* data, std::size_t count, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    data[i] = uniform_from_hash(seed, i);
}

unsigned blocks_for(std::size_t count) {
  const std::size_t blocks = (count + 255) / 256;
  return static_cast<unsigned>(blocks < 65535 ? (blocks ? blocks : 1) : 65535);
}

}  // namespace

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) TWIN_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) cudaFree(data_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void fill_random_bf16(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  fill_bf16_kernel<<<blocks_for(count), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
  TWIN_CUDA_CHECK_LAUNCH();
}

void fill_random_f32(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  fill_f32_kernel<<<blocks_for(count), 256, 0, stream>>>(static_cast<float*>(data), count, seed);
  TWIN_CUDA_CHECK_LAUNCH();
}

}  // namespace twin::gpu
