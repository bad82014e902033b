// The collective tables of a profile: every calibrated collective at every message size over each group
// of the first g ranks (g = 2..world), with its span and a fitted link model; the all-to-all also as expert
// parallelism's dispatch sends it, in kAllToAllBlocksPerPeer blocks per peer. Every rank calls these
// together; the returned tables are complete on rank 0.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nccl.h>

#include "cost/profile.hpp"

namespace twin::gpu {

// The blocks per peer of the extra all-to-all tables (the one-block table is nccl-tests' alltoall): a dispatch
// of 8 to 256 experts over 2 to 64 EP ranks sends 1 to 128 blocks per peer, each power of two of which is
// measured (NCCL splits a group of many sends into several kernel launches, a step no coarser grid would see).
inline constexpr int kAllToAllBlocksPerPeer[] = {2, 4, 8, 16, 32, 64, 128};

struct CollectiveCalibrationOptions {
  Bytes max_bytes = 1ll << 30;
  bool quick = false;
  double nominal_intra_node_GBps = 0;  // per GPU per direction (NVLink or PCIe of the GPU preset)
  double nominal_inter_node_GBps = 0;  // per GPU per direction; 0 when unknown
  std::function<void(const std::string&)> progress;  // rank 0 only
};

// `node_of_rank[r]`: a node id per world rank (equal for ranks that share a host).
std::vector<CollectiveTable> calibrate_collectives(ncclComm_t world, int world_rank,
                                                   const std::vector<std::uint64_t>& node_of_rank,
                                                   const CollectiveCalibrationOptions& options);

// Fits `table.fit` from its points with the collective's ring steps and busbw factor.
void fit_collective_table(CollectiveTable& table);

}  // namespace twin::gpu
