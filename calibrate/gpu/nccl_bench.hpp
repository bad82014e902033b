// NCCL collectives timed as nccl-tests times them: float32 buffers, warm-up iterations, then many
// iterations between two CUDA events, the mean per iteration averaged over the group's ranks;
// algbw = S / t and busbw = algbw * factor with nccl-tests' S and factor for each collective.
#pragma once
#include <functional>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "gpu/device_buffer.hpp"
#include "cost/collective_tables.hpp"
#include "cost/profile.hpp"
#include "core/op.hpp"

namespace twin::gpu {

// The collectives calibration measures: the profile's (cost/collective_tables.hpp).
inline constexpr const auto& kCalibratedCollectives = kMeasuredCollectives;

// nccl-tests' S for a requested size: element counts are rounded down so that each rank's share is whole.
Bytes collective_size_bytes(OpKind collective, Bytes requested_bytes, int ranks);
// Iterations for one size: about 4 GiB of traffic, between 5 and 100; warm-up is a fifth of it, at least 2.
int collective_iterations(Bytes size_bytes);
// S rounded down so that every block of an all-to-all of `blocks_per_peer` blocks per rank is whole (bytes).
Bytes all_to_all_blocks_size_bytes(Bytes requested_bytes, int ranks, int blocks_per_peer);
// 4 KiB .. max_bytes: every power of two, or every power of four when `quick`.
std::vector<Bytes> collective_sizes(Bytes max_bytes, bool quick);

class CollectiveBench {
 public:
  // Buffers for messages up to `max_bytes` (send and receive, max_bytes each).
  CollectiveBench(Bytes max_bytes, cudaStream_t stream);
  // One collective of nccl-tests' size S = `size_bytes` (already rounded by collective_size_bytes).
  void launch(ncclComm_t comm, OpKind collective, Bytes size_bytes);
  // Mean time per iteration on this rank, in microseconds (nccl-tests: events around `iterations` launches).
  double time_us(ncclComm_t comm, OpKind collective, Bytes size_bytes, int warmup, int iterations);
  // The table row, time averaged over the communicator's ranks (a collective call on `comm`).
  CollectivePoint measure(ncclComm_t comm, OpKind collective, Bytes size_bytes);
  // An all-to-all of S = `size_bytes` as expert parallelism's dispatch issues it (gpu/row_exchange.hpp): S / n to
  // each rank in `blocks_per_peer` equal blocks, one grouped send and receive per block. Rounded as
  // all_to_all_blocks_size_bytes.
  void launch_blocks(ncclComm_t comm, Bytes size_bytes, int blocks_per_peer);
  CollectivePoint measure_blocks(ncclComm_t comm, Bytes size_bytes, int blocks_per_peer);
  cudaStream_t stream() const { return stream_; }

 private:
  double time_launches_us(const std::function<void()>& launch, int warmup, int iterations);
  CollectivePoint point_over_ranks(ncclComm_t comm, OpKind collective, Bytes size_bytes, double mine_us);
  cudaStream_t stream_;
  DeviceBuffer send_, recv_, scalar_;
  Bytes max_bytes_;
};

}  // namespace twin::gpu
