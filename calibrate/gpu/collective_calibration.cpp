// Groups come from ncclCommSplit of the world communicator (no new rendezvous port per group); ranks
// outside the group get no communicator and wait for the next split.
#include "calibrate/gpu/collective_calibration.hpp"

#include <set>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/nccl_bench.hpp"

namespace twin::gpu {

void fit_collective_table(CollectiveTable& table) {
  std::vector<double> sizes, times;
  for (const CollectivePoint& p : table.points) {
    sizes.push_back(static_cast<double>(p.size_bytes));
    times.push_back(p.time_us);
  }
  const AffineFit fit = fit_affine_relative(sizes, times);
  table.fit = link_profile_from_fit(fit, algorithm_steps(table.collective, table.group_size),
                                    busbw_factor(table.collective, table.group_size), table.nominal_bandwidth_GBps);
}

namespace {

// One table over `group`: `placement`'s span and nominal bandwidth, every size of the sweep.
CollectiveTable measure_table(CollectiveBench& bench, ncclComm_t group, const CollectiveTable& placement,
                              OpKind collective, int blocks_per_peer, int world_rank,
                              const CollectiveCalibrationOptions& options) {
  CollectiveTable table = placement;
  table.collective = collective;
  table.blocks_per_peer = blocks_per_peer;
  for (Bytes requested : collective_sizes(options.max_bytes, options.quick)) {
    if (blocks_per_peer == 1) {
      table.points.push_back(bench.measure(group, collective, collective_size_bytes(collective, requested, table.group_size)));
      continue;
    }
    const Bytes size = all_to_all_blocks_size_bytes(requested, table.group_size, blocks_per_peer);
    if (size > 0) table.points.push_back(bench.measure_blocks(group, size, blocks_per_peer));
  }
  if (table.points.empty()) return table;  // no size of the sweep holds a whole block for every rank: no table
  fit_collective_table(table);
  if (world_rank == 0 && options.progress) {
    const CollectivePoint& last = table.points.back();
    options.progress(fmt::format("{}{} over {} GPUs ({} node{}): {} sizes, {:.1f} us at {} KiB, busbw {:.1f} GB/s at {} MiB",
                                 to_string(collective),
                                 blocks_per_peer > 1 ? fmt::format(" in {} blocks per peer", blocks_per_peer) : "",
                                 table.group_size, table.nodes, table.nodes > 1 ? "s" : "", table.points.size(),
                                 table.points.front().time_us, table.points.front().size_bytes >> 10,
                                 last.busbw_GBps, last.size_bytes >> 20));
  }
  return table;
}

}  // namespace

std::vector<CollectiveTable> calibrate_collectives(ncclComm_t world, int world_rank,
                                                   const std::vector<std::uint64_t>& node_of_rank,
                                                   const CollectiveCalibrationOptions& options) {
  const int world_size = static_cast<int>(node_of_rank.size());
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<CollectiveTable> tables;
  {
    CollectiveBench bench(options.max_bytes, stream);
    for (int group_size = 2; group_size <= world_size; ++group_size) {
      ncclComm_t group = nullptr;
      const int color = world_rank < group_size ? 0 : NCCL_SPLIT_NOCOLOR;
      TWIN_NCCL_CHECK(ncclCommSplit(world, color, world_rank, &group, nullptr));
      if (group == nullptr) continue;
      const std::set<std::uint64_t> nodes(node_of_rank.begin(), node_of_rank.begin() + group_size);
      const int span_nodes = static_cast<int>(nodes.size());
      CollectiveTable placement;
      placement.group_size = group_size;
      placement.nodes = span_nodes;
      placement.ranks_per_node = (group_size + span_nodes - 1) / span_nodes;
      placement.nominal_bandwidth_GBps = span_nodes > 1 && options.nominal_inter_node_GBps > 0
                                             ? options.nominal_inter_node_GBps
                                             : options.nominal_intra_node_GBps;
      for (OpKind collective : kCalibratedCollectives) {
        tables.push_back(measure_table(bench, group, placement, collective, 1, world_rank, options));
        if (collective != OpKind::all_to_all) continue;
        for (int blocks : kAllToAllBlocksPerPeer)
          if (CollectiveTable t = measure_table(bench, group, placement, collective, blocks, world_rank, options);
              !t.points.empty())
            tables.push_back(std::move(t));
      }
      TWIN_NCCL_CHECK(ncclCommDestroy(group));
    }
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return tables;
}

}  // namespace twin::gpu
