// GEMM timing in batches: many shapes launched back to back, one synchronisation and one CUPTI flush per
// batch. Each shape is timed exactly as GemmBench::measure times it alone (warm-up launches, a clock probe, one
// CUPTI region per timed repetition, a clock probe; input sets rotated so that the L2 cache does not hold them),
// on operands that lie in one arena allocated and filled with random data once, instead of buffers allocated,
// filled and freed around every shape (each free waited for the GPU).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/gemm_grid.hpp"
#include "calibrate/gemm_schedule.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"

namespace twin::gpu {

// One timing of one shape: its measurement, with sm_clock_MHz the clock it ran at, and the cuBLASLt
// kernel(s) CUPTI saw.
struct GemmTiming {
  Measurement measured;
  std::string kernel;
};

class GemmBatchTimer {
 public:
  // Operands for every shape of `shapes` (and `also`) that fits in `max_bytes`, in one arena of random data.
  GemmBatchTimer(GemmBench& bench, CuptiKernelTimer& timer, const std::vector<GemmShape>& shapes, std::size_t max_bytes);

  // Times each shape of `batch` with `runs`' warm-up and timed launches, after `heater_launches` launches of
  // `heater` (a burst that covers the host's gap before the batch); nullopt for a shape too large.
  std::vector<std::optional<GemmTiming>> time(const std::vector<GemmShape>& batch, const GemmRuns& runs,
                                              const GemmShape& heater, int heater_launches);

 private:
  void launch(const GemmShape& shape, const GemmOperandLayout& layout, std::size_t set);

  GemmBench& bench_;
  CuptiKernelTimer& timer_;
  std::size_t l2_bytes_ = 0, max_bytes_ = 0;
  DeviceBuffer arena_;
  DeviceBuffer fp8_arena_;  // the FP8 shapes' operands (E4M3 data), where the batch has any
  std::uint64_t next_region_ = std::uint64_t{1} << 40;  // apart from GemmBench::measure's regions
};

}  // namespace twin::gpu
