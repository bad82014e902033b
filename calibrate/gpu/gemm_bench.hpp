// GEMMs of the op vocabulary through the executor's GEMM paths (bf16 in and out, fp32 accumulation): one
// problem through cuBLASLt (gpu/matmul.hpp), a grouped one (count > 1: the experts' GEMMs) as the executor's
// grouped GEMM runs it (gpu/grouped_matmul.hpp); and their timing from CUPTI kernel records: warm-up launches, then
// one CUPTI region per timed repetition.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <cuda_runtime.h>

#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/fp8_matmul.hpp"
#include "calibrate/gemm_merge.hpp"
#include "cost/profile.hpp"
#include "gpu/grouped_matmul.hpp"
#include "gpu/matmul.hpp"
#include "core/op.hpp"

namespace twin::gpu {

// Element counts of the three row-major operands of one problem: A is [m,k] ([k,m] when transpose_a),
// B is [k,n] ([n,k] when transpose_b), C is [m,n]; `count` problems lie back to back.
std::size_t gemm_a_elements(const GemmShape& shape);
std::size_t gemm_b_elements(const GemmShape& shape);
std::size_t gemm_c_elements(const GemmShape& shape);
using twin::gemm_flops;  // 2 m n k count
// Random operand data of `elements` elements as the shape's operands are stored: bf16, or E4M3 for FP8 operands
// (values in [-1, 1], valid E5M2 bytes too; never zeros, which run faster).
void fill_operand(const GemmShape& shape, void* data, std::size_t elements, std::uint64_t seed, cudaStream_t stream);

class GemmBench {
 public:
  static constexpr std::size_t kWorkspaceBytes = 64ull << 20;  // the heuristic's limit while calibrating
  explicit GemmBench(cudaStream_t stream);
  GemmBench(const GemmBench&) = delete;
  GemmBench& operator=(const GemmBench&) = delete;

  // C = A * B on device pointers laid out as `shape` says: count == 1 through Matmul (throws when cuBLASLt has
  // no algorithm), count > 1 as `count` equal groups of one GroupedMatmul run; a shape of FP8 operands through
  // Fp8Matmul (scales of 1, per tensor or per block as the shape's inputs say: fp8_blockwise as the forward reads
  // it, 1x128 by 128x128, fp8_blockwise_1d as the weight gradient does, 1x128 by 1x128; both operands stored as
  // Hopper's FP8 kernels read them: the executor's casts write them so) — per tensor or per block, one problem
  // (throws otherwise).
  void launch(const GemmShape& shape, const void* a, const void* b, void* c);
  // Median/p10/p90 of `repetitions` CUPTI-timed runs on random data after `warmup` runs; std::nullopt when
  // the operands do not fit in `max_bytes` of device memory. Input sets rotate so that the L2 cache does not
  // hold a small problem's operands between repetitions.
  std::optional<Measurement> measure(const GemmShape& shape, CuptiKernelTimer& timer, int warmup, int repetitions,
                                     std::size_t max_bytes);
  cudaStream_t stream() const { return stream_; }
  // The kernel(s) cuBLASLt ran for the last measured shape, as CUPTI names them ('+' between the kernels of
  // one repetition, e.g. a split-K GEMM and its reduction).
  const std::string& last_kernel() const { return last_kernel_; }
  // The SM clock (MHz) around the last measured shape's timed runs: the mean of a probe just before them
  // and one just after (calibrate/gpu/clock_probe.hpp).
  double last_sm_clock_MHz() const { return last_sm_clock_MHz_; }

 private:
  cudaStream_t stream_;
  // The executor's GEMM paths: calibration times the calls training makes.
  exec::Matmul matmul_;
  exec::GroupedMatmul grouped_;
  exec::Fp8Matmul fp8_;
  DeviceBuffer unit_scales_;  // device floats of 1 at [0] and [4] (16-byte aligned): the FP8 operands' inverse scales
  DeviceBuffer block_scales_;  // device floats of 1: both block-scaled operands' records (grown to the largest asked)
  // block_scales_ holding at least `floats` ones (grown outside any timed run: measure asks it before timing).
  const float* block_scales(std::size_t floats);
  std::uint64_t next_region_ = 1;
  std::string last_kernel_;
  double last_sm_clock_MHz_ = 0;
};

}  // namespace twin::gpu
