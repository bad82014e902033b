// Owned device memory and deterministic random fills (never time on zeros: they run faster).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

#include <cuda_runtime.h>

namespace twin::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Uniform values in [-1, 1) from a counter-based hash of (seed, index): same seed, same data.
void fill_random_bf16(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream);
void fill_random_f32(void* data, std::size_t count, std::uint64_t seed, cudaStream_t stream);

}  // namespace twin::gpu
