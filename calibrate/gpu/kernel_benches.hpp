// One runnable instance of a non-GEMM op: device buffers filled with random data (never zeros) and the
// executor kernels the op launches, enqueued by run(). Calibration builds several per op to rotate.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/device_buffer.hpp"
#include "calibrate/gpu/kernel_calibration.hpp"

namespace twin::gpu {

struct KernelBench {
  std::vector<DeviceBuffer> buffers;
  std::function<void(cudaStream_t)> run;
  std::size_t bytes() const;
};

// std::nullopt with `why_not` set when the op's shape is one the kernels cannot run.
std::optional<KernelBench> make_kernel_bench(const Op& op, const KernelModelFacts& facts, std::uint64_t seed,
                                             cudaStream_t stream, std::string& why_not);

}  // namespace twin::gpu
