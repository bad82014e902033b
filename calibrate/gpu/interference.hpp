// Overlap interference: a large GEMM timed alone and while an NCCL all-reduce runs on another stream,
// and the all-reduce alone and beside the GEMMs; the ratios of medians (CUPTI kernel spans) are the
// profile's compute_slowdown and communication_slowdown. Every rank calls it together.
#pragma once
#include <nccl.h>

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

}  // namespace twin::gpu
