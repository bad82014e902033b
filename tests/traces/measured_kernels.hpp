// Hand-made CUPTI-like kernel records for the two-stage graph (tests/traces/two_stage_graph.hpp), two
// measured iterations per rank, at absolute device timestamps near 1.7e18 ns as CUPTI gives them.
// Every duration below is set by hand; the tests recompute medians and sums from these comments.
#pragma once
#include <vector>

#include "tests/traces/two_stage_graph.hpp"
#include "traces/measured_ops.hpp"

namespace twin::testing {

inline constexpr TimeNs kBaseNs = 1'700'000'000'123'456'789;
inline constexpr std::uint32_t kComputeStream = 7, kCommStream = 13, kPipelineStream = 21, kSetupStream = 3;

inline MeasuredKernel kernel(std::string name, std::int32_t iteration, OpIndex op, TimeNs start_ns, TimeNs end_ns,
                             std::uint32_t stream_id) {
  const TimeNs base = kBaseNs + (iteration - 3) * 100'000;
  return {std::move(name), base + start_ns, base + end_ns, stream_id, iteration, op};
}

// Stage 0, rank 0, iterations 3 and 4 (durations: iteration 3 / iteration 4):
//   c0.0 fc1 fwd      2 kernels 1100 / 3 kernels 1200     c0.4 recv            2500 / 2500
//   c0.1 all_reduce   600 / 700                            c0.5 optimizer       absent (no kernel)
//   c0.2 send         800 / 800                            c0.6 reduce_scatter  600 / 800
//   c0.3 fc1 bwd      1000 / 1100
// Spans 6600 / 7100; one setup memset outside any op.
inline std::vector<MeasuredKernel> stage0_kernels() {
  return {
      kernel("sm90_gemm_a", 3, 0, 0, 400, kComputeStream),
      kernel("sm90_gemm_b", 3, 0, 450, 1100, kComputeStream),
      kernel("ncclAllReduce", 3, 1, 1100, 1700, kCommStream),
      kernel("ncclSend", 3, 2, 1700, 2500, kPipelineStream),
      kernel("ncclRecv", 3, 4, 2500, 5000, kPipelineStream),
      kernel("sm90_gemm_bwd", 3, 3, 5000, 6000, kComputeStream),
      kernel("ncclReduceScatter", 3, 6, 6000, 6600, kCommStream),
      {"memset", kBaseNs + 6700, kBaseNs + 6800, kSetupStream, -1, kNoOp},
      kernel("sm90_gemm_a", 4, 0, 0, 500, kComputeStream),
      kernel("sm90_gemm_b", 4, 0, 500, 900, kComputeStream),
      kernel("sm90_gemm_c", 4, 0, 950, 1200, kComputeStream),
      kernel("ncclAllReduce", 4, 1, 1200, 1900, kCommStream),
      kernel("ncclSend", 4, 2, 1900, 2700, kPipelineStream),
      kernel("ncclRecv", 4, 4, 2700, 5200, kPipelineStream),
      kernel("sm90_gemm_bwd", 4, 3, 5200, 6300, kComputeStream),
      kernel("ncclReduceScatter", 4, 6, 6300, 7100, kCommStream),
  };
}

// Stage 1, rank 4, iterations 3 and 4: c1.0 recv 2000 / 2400, c1.1 attention fwd 1000 / 900, c1.2 attention
// bwd 1000 / 1000, c1.3 send 1000 / 1000, c1.4 optimizer 1900 / 1200. Spans 6900 / 6500.
inline std::vector<MeasuredKernel> stage1_kernels() {
  return {
      kernel("ncclRecv", 3, 0, 0, 2000, kPipelineStream),
      kernel("flash_fwd", 3, 1, 2000, 3000, kComputeStream),
      kernel("flash_bwd", 3, 2, 3000, 4000, kComputeStream),
      kernel("ncclSend", 3, 3, 4000, 5000, kPipelineStream),
      kernel("adamw", 3, 4, 5000, 6900, kComputeStream),
      kernel("ncclRecv", 4, 0, 0, 2400, kPipelineStream),
      kernel("flash_fwd", 4, 1, 2400, 3300, kComputeStream),
      kernel("flash_bwd", 4, 2, 3300, 4300, kComputeStream),
      kernel("ncclSend", 4, 3, 4300, 5300, kPipelineStream),
      kernel("adamw", 4, 4, 5300, 6500, kComputeStream),
  };
}

}  // namespace twin::testing
