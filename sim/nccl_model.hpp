// NCCL's own cost model of its collectives, as NCCL 2.30.7 states it (src/graph/tuning.cc, commit 5067397c;
// paraphrased with file and line in docs/validation/nccl_model_notes.md): per algorithm and protocol a
// latency (a base plus a latency per hop, the hop's hardware NVLink, PCIe or network) and a bandwidth
// factor; NCCL runs the pair its model predicts fastest. Only what twin models is here: ring and tree, over
// LL, LL128 and Simple. Not modelled: NVLink SHARP (NVLS; off on the machines twin was measured on),
// CollNet (in-network reduction), PAT (all-gather and reduce-scatter with one GPU per node). NCCL's ceilings
// on a protocol's bus bandwidth (LL's llMaxBw, the per-channel caps) are in sim/nccl_caps.hpp.
#pragma once
#include <limits>
#include <string_view>

#include "core/op.hpp"
#include "core/op_graph.hpp"

namespace twin::sim {

enum class NcclAlgorithm { tree, ring };
enum class NcclProtocol { ll, ll128, simple };
inline constexpr NcclProtocol kNcclProtocols[] = {NcclProtocol::ll, NcclProtocol::ll128, NcclProtocol::simple};
std::string_view to_string(NcclProtocol protocol);

// What the latency of a hop depends on: the link inside a node and whether the group spans nodes.
struct NcclHops {
  bool intra_nvlink = true;  // NVLink/NVSwitch inside the node; false: PCIe
};

// NCCL's latency (us) of one collective of `kind` over `span` (ring: base + intra hops x intra latency +
// node-crossing hops x network latency, x1.4 for Simple all-reduce across nodes, NCCL's "ring plateau" for
// large messages; tree: base + 2 (intra chain + floor(log2 nodes) network hops)).
double nccl_latency_us(NcclAlgorithm algorithm, NcclProtocol protocol, OpKind kind, const GroupSpan& span,
                       const NcclHops& hops);

// The fraction of the links' bandwidth the protocol delivers for `bytes` (LL 1/2, LL128 0.92 of Simple on
// a ring; a tree's 0.92, LL's further 1/3.8, LL128's 120/128, and NCCL's tree correction by message size), at
// most `ceiling_share`: NCCL's ceiling for the pair over the links' bus bandwidth (sim/nccl_caps.hpp), taken
// before the tree's size correction as NCCL takes it.
double nccl_bandwidth_factor(NcclAlgorithm algorithm, NcclProtocol protocol, double bytes,
                             double ceiling_share = std::numeric_limits<double>::infinity());

// Whether NCCL runs the pair for `kind` over `span`: tree only for all-reduce across nodes; LL128 only with
// NVLink inside the node.
bool nccl_supports(NcclAlgorithm algorithm, NcclProtocol protocol, OpKind kind, const GroupSpan& span,
                   const NcclHops& hops);

}  // namespace twin::sim
