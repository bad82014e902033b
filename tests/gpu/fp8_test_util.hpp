// The FP8 kernels' host reference (tests/gpu/fp8_test.cpp, fp8_delayed_test.cpp): a tensor quantized on the host
// exactly as the cast kernels quantize (the same scale rule and cuda_fp8.h's round-to-nearest saturating
// conversion), its values back as float64, and device bytes read back.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include <cuda_fp8.h>

#include "gpu/fp8_cast.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {

inline double fp8_value(std::uint8_t byte, kernels::Fp8Type type) {
  const __half_raw half = __nv_cvt_fp8_to_halfraw(byte, type == kernels::Fp8Type::e4m3 ? __NV_E4M3 : __NV_E5M2);
  return static_cast<double>(__half2float(__half(half)));
}

// A tensor quantized on the host: its bytes (rows x cols, row-major), its amax and inverse scale.
struct HostFp8 {
  std::vector<std::uint8_t> bytes;
  float amax = 0, scale_inv = 1;
  kernels::Fp8Type type = kernels::Fp8Type::e4m3;
  std::vector<double> dequantized() const {
    std::vector<double> out(bytes.size());
    for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = fp8_value(bytes[i], type) * scale_inv;
    return out;
  }
};

// x quantized with `scale` (the amax recorded beside, as the delayed cast records it).
inline HostFp8 quantize_with_scale(const std::vector<double>& x, kernels::Fp8Type type, float scale) {
  HostFp8 q;
  q.type = type;
  for (double v : x) q.amax = std::max(q.amax, static_cast<float>(std::fabs(v)));
  q.scale_inv = 1.0f / scale;
  for (double v : x)
    q.bytes.push_back(__nv_cvt_float_to_fp8(static_cast<float>(v) * scale, __NV_SATFINITE,
                                            type == kernels::Fp8Type::e4m3 ? __NV_E4M3 : __NV_E5M2));
  return q;
}

// x quantized with its own scale (current scaling).
inline HostFp8 quantize_on_host(const std::vector<double>& x, kernels::Fp8Type type) {
  float amax = 0;
  for (double v : x) amax = std::max(amax, static_cast<float>(std::fabs(v)));
  return quantize_with_scale(x, type, kernels::fp8_scale_for(amax, type));
}

inline std::vector<std::uint8_t> bytes_to_host(const gpu::DeviceBuffer& device, std::size_t count) {
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint8_t> host(count);
  TWIN_CUDA_CHECK(cudaMemcpy(host.data(), device.data(), count, cudaMemcpyDeviceToHost));
  return host;
}

inline std::vector<std::uint8_t> transposed(const std::vector<std::uint8_t>& bytes, std::int64_t rows, std::int64_t cols) {
  std::vector<std::uint8_t> out(bytes.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = bytes[r * cols + c];
  return out;
}

}  // namespace twin::test
