// Helpers of the kernel tests: random device tensors (never zeros), NaN poisoning of outputs, copies to
// the host in double, and the relative error ||got - ref|| / ||ref|| that every kernel is judged by.
#pragma once
#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <vector>

#include <cuda_bf16.h>

#include "gpu/checks.hpp"
#include "gpu/device_buffer.hpp"

namespace twin::test {

inline int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

#define REQUIRE_GPU() \
  if (::twin::test::gpu_count() < 1) GTEST_SKIP() << "needs a CUDA GPU; none found"

// A fresh seed for every tensor of every test.
inline std::uint64_t next_seed() {
  static std::uint64_t seed = 20261121;
  return ++seed * 7919;
}

inline gpu::DeviceBuffer random_bf16(std::size_t count, double scale = 1.0) {
  gpu::DeviceBuffer buffer(count * 2);
  gpu::fill_random_bf16(buffer.data(), count, next_seed(), nullptr);
  if (scale != 1.0) {  // rescale on the host: rare, small tensors
    std::vector<__nv_bfloat16> host(count);
    TWIN_CUDA_CHECK(cudaMemcpy(host.data(), buffer.data(), count * 2, cudaMemcpyDeviceToHost));
    for (auto& v : host) v = __float2bfloat16(static_cast<float>(__bfloat162float(v) * scale));
    TWIN_CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), count * 2, cudaMemcpyHostToDevice));
  }
  return buffer;
}
inline gpu::DeviceBuffer random_f32(std::size_t count) {
  gpu::DeviceBuffer buffer(count * 4);
  gpu::fill_random_f32(buffer.data(), count, next_seed(), nullptr);
  return buffer;
}
// NaN in both bf16 and fp32: an element the kernel fails to write shows up in the error.
inline gpu::DeviceBuffer poisoned(std::size_t bytes) {
  gpu::DeviceBuffer buffer(bytes);
  TWIN_CUDA_CHECK(cudaMemset(buffer.data(), 0xFF, bytes));
  return buffer;
}
template <typename T>
gpu::DeviceBuffer upload(const std::vector<T>& host) {
  gpu::DeviceBuffer buffer(host.size() * sizeof(T));
  TWIN_CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

inline std::vector<double> bf16_to_host(const void* device, std::size_t count) {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> raw(count);
  TWIN_CUDA_CHECK(cudaMemcpy(raw.data(), device, count * 2, cudaMemcpyDeviceToHost));
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}
inline std::vector<double> f32_to_host(const void* device, std::size_t count) {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> raw(count);
  TWIN_CUDA_CHECK(cudaMemcpy(raw.data(), device, count * 4, cudaMemcpyDeviceToHost));
  return std::vector<double>(raw.begin(), raw.end());
}

// ||got - ref|| / ||ref||; infinity when got holds a NaN (an unwritten or broken element).
inline double relative_error(const std::vector<double>& got, const std::vector<double>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double error2 = 0, norm2 = 0;
  for (std::size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    error2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    norm2 += ref[i] * ref[i];
  }
  return std::sqrt(error2 / (norm2 > 0 ? norm2 : 1));
}

// Prints a kernel's error against its reference (the GPU logs keep them) and returns it.
inline double report(const char* what, double error) {
  std::printf("[kernel-error] %-34s %.3e\n", what, error);
  return error;
}
// Median milliseconds of `runs` launches of `launch` on `stream` (CUDA events), after two warm-up launches.
template <typename Launch>
double median_ms(Launch launch, int runs, cudaStream_t stream = nullptr) {
  for (int i = 0; i < 2; ++i) launch();
  cudaEvent_t start, stop;
  TWIN_CUDA_CHECK(cudaEventCreate(&start));
  TWIN_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times_ms;
  for (int i = 0; i < runs; ++i) {
    TWIN_CUDA_CHECK(cudaEventRecord(start, stream));
    launch();
    TWIN_CUDA_CHECK(cudaEventRecord(stop, stream));
    TWIN_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TWIN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times_ms.push_back(ms);
  }
  TWIN_CUDA_CHECK(cudaEventDestroy(start));
  TWIN_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times_ms.begin(), times_ms.end());
  return times_ms[times_ms.size() / 2];
}

inline __nv_bfloat16* bf(const gpu::DeviceBuffer& b) { return static_cast<__nv_bfloat16*>(b.data()); }
inline float* f32(const gpu::DeviceBuffer& b) { return static_cast<float*>(b.data()); }
inline std::int32_t* i32(const gpu::DeviceBuffer& b) { return static_cast<std::int32_t*>(b.data()); }

constexpr double kBf16Tolerance = 1e-2;  // outputs stored in bf16
constexpr double kF32Tolerance = 1e-5;   // outputs kept in fp32

}  // namespace twin::test
