// One runnable instance of a non-GEMM op: device buffers filled with random data (never zeros) and the
// executor kernels the op launches, enqueued by run(). Calibration builds several per op to rotate.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gpu/device_buffer.hpp"
#include "gpu/op_kernels.hpp"
#include "calibrate/gpu/kernel_calibration.hpp"

namespace twin::gpu {

struct KernelBench {
  std::vector<DeviceBuffer> buffers;
  std::function<void(cudaStream_t)> run;
  std::size_t bytes() const;
};

// Keeps the executor's attention that attention benches share (one cuDNN handle, one plan per shape) alive while
// the returned handle lives, so that benches made and freed one after another do not each create their own.
std::shared_ptr<void> hold_shared_attention();

// std::nullopt with `why_not` set when the op's shape is one the kernels cannot run.
std::optional<KernelBench> make_kernel_bench(const Op& op, const KernelModelFacts& facts, std::uint64_t seed,
                                             cudaStream_t stream, std::string& why_not);

// The history of the delayed-scaling state an fp8_cast bench runs with: Megatron's default amax_history_len (the
// kernel reads the history once per block).
inline constexpr int kFp8BenchHistory = 1;

// The cast the bench of fp8_cast `op` launches: `call` (its tensor, copies and scale records) with the op's recipe
// (Op::fp8_recipe, nothing inferred from its bytes) and, for delayed scaling, `delayed_state`
// (kernels::fp8_delayed_state_floats of kFp8BenchHistory); blockwise with the blocks of the tensor it casts
// (fp8_cast_blocks). std::nullopt with `why_not` for a recipe without a cast kernel (mxfp8).
std::optional<Fp8Cast> fp8_cast_bench_call(const Op& op, Fp8Cast call, float* delayed_state, std::string& why_not);

}  // namespace twin::gpu
