// Overlap interference, measured pair by pair: a compute kernel (a GEMM, or a memory-bound add) timed alone and
// while NCCL collectives run back to back on another stream, and a collective timed alone and while the compute
// kernels run; CUPTI kernel spans, medians over the kernels that ran entirely inside the other stream's busy window,
// averaged over the ranks. measure_interference is the profile's scalar pair (8192^3 GEMMs beside 256 MiB
// all-reduces), which the simulator prices; measure_interference_points the grid of cost/interference.hpp (every
// calibrated collective kind at several sizes beside GEMMs of several waves and a memory-bound kernel), which a
// calibration records in its provenance (tools/interference_points.py makes overlap.points of it). Every rank calls
// them together.
#pragma once
#include <array>
#include <vector>

#include <nccl.h>

#include "cost/interference.hpp"
#include "cost/profile.hpp"

namespace twin::gpu {

struct InterferenceMeasurement {
  OverlapProfile overlap;
  double gemm_alone_ns = 0, gemm_overlapped_ns = 0;
  double all_reduce_alone_ns = 0, all_reduce_overlapped_ns = 0;
  GemmShape gemm;
  Bytes all_reduce_bytes = 0;
};

InterferenceMeasurement measure_interference(ncclComm_t world, bool quick);

// One pair's medians (ns) alone and beside the other kernel, and how busy each stream kept its window together.
struct PairTimes {
  double compute_alone_ns = 0, compute_overlapped_ns = 0, comm_alone_ns = 0, comm_overlapped_ns = 0;
  double comm_busy_share = 0, compute_busy_share = 0;
  std::array<double, 6> fields() const {
    return {compute_alone_ns, compute_overlapped_ns, comm_alone_ns, comm_overlapped_ns, comm_busy_share,
            compute_busy_share};
  }
  static PairTimes from_fields(const std::array<double, 6>& f) { return {f[0], f[1], f[2], f[3], f[4], f[5]}; }
};

// One measured pair: the point the profile holds (slowdowns clamped to >= 1), the GEMM it ran (for a GEMM point) and
// the times behind it (the mean over ranks of each rank's figures).
struct InterferencePairTiming {
  InterferencePoint point;
  GemmShape gemm;
  PairTimes times;
};

// Collectives of 4, 32 and 256 MiB (quick: 32 and 256) beside six GEMMs from 0.24 to 15.5 waves (quick: three) and a
// residual add of 64 Mi elements, over `world`'s ranks.
std::vector<InterferencePairTiming> measure_interference_points(ncclComm_t world, int world_size, bool quick);

// The points' provenance: each pair's times and raw ratios.
nlohmann::json interference_timings_json(const std::vector<InterferencePairTiming>& pairs);

}  // namespace twin::gpu
