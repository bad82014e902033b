// NCCL's ceilings on the bus bandwidth of a protocol, as its own cost model states them (NCCL 2.30.7,
// src/graph/tuning.cc at commit 5067397c: the constants at lines 177-211, where they apply at lines 325-337;
// paraphrased in docs/validation/nccl_model_notes.md sections 2.3 and 4). NCCL's tuner prices a pair by
// min(its share of the graph's bus bandwidth, a ceiling), and so picks it; twin's links give the share
// (sim/nccl_model.hpp), these give the ceiling:
//   ring LL      llMaxBw: 141 GB/s on one Hopper node, 87.7 on one Ampere node; across nodes (an Intel host, as
//                the ring's net overhead in sim/nccl_model.cpp assumes) 39.0 on two nodes, 20.4 on more. LL
//                sends 4 bytes of data and a 4-byte flag per 8-byte store, and across nodes each line crosses
//                the NIC with its flag: what a GPU sustains in LL is far below its links.
//   ring LL128   channels x 36.7 GB/s per channel on Hopper, 20 on Ampere, 40 on Blackwell.
//   tree         channels x perChMaxTreeBw (Hopper 38.7 / 41.4 / 36.0 on 1 / 2 / more nodes, Ampere 24.0 /
//                23.6 / 17.8); LL a further min(/3.8, llMaxBw); LL128 min(x 120/128, channels x
//                perChMaxTreeLL128Bw: Hopper 36.7 / 36.7 / 29.0, Ampere 20).
// The channels are those of NCCL's graph search across nodes: one ring per NIC of the node (the notes' worked
// DGX A100 example: 8 HDR NICs, 8 channels of 24 GB/s). Per-channel ceilings are applied across nodes only: on
// one node NCCL's graph runs a channel per NVLink-worth of bandwidth (20-21 GB/s), below every per-channel
// ceiling. A GPU whose generation twin does not know (no NCCL compute-capability index) gets no ceiling.
#pragma once
#include <limits>
#include <string_view>

#include "core/op_graph.hpp"
#include "sim/nccl_model.hpp"

namespace twin::sim {

enum class NcclGeneration { unknown, ampere, hopper, blackwell };
// By gpu_family (cost/profile.hpp): NCCL indexes by compute capability, >= 8.0 Ampere (Ada, 8.9, included).
NcclGeneration nccl_generation(std::string_view gpu_name);

inline constexpr double kNoCeiling = std::numeric_limits<double>::infinity();

// The ceiling, GB/s of bus bandwidth, NCCL's model puts on (algorithm, protocol) over `span` for GPUs of
// `generation` whose nodes have `channels` inter-node channels; kNoCeiling where it puts none.
double nccl_bus_ceiling_GBps(NcclAlgorithm algorithm, NcclProtocol protocol, const GroupSpan& span,
                             NcclGeneration generation, int channels);

}  // namespace twin::sim
