// NCCL 2.30.7's constants (src/graph/tuning.cc; docs/validation/nccl_model_notes.md sections 2, 4, 5 give
// each with its line) and the formulas that combine them.
#include "sim/nccl_model.hpp"

#include <algorithm>
#include <cmath>

#include "cost/collective_steps.hpp"

namespace twin::sim {
namespace {

constexpr int kAlgorithms = 2, kProtocols = 3;
int a(NcclAlgorithm algorithm) { return static_cast<int>(algorithm); }
int p(NcclProtocol protocol) { return static_cast<int>(protocol); }

// baseLat[algorithm][protocol], us (tuning.cc:150-155): tree, ring x LL, LL128, Simple.
constexpr double kBaseLatency[kAlgorithms][kProtocols] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
// hwLat per hop, us (tuning.cc:157-175).
constexpr double kNvlinkLatency[kAlgorithms][kProtocols] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
constexpr double kPcieLatency[kAlgorithms][kProtocols] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}};
constexpr double kNetworkLatency[kAlgorithms][kProtocols] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
// NCCL_NET_OVERHEAD on Intel hosts (tuning.cc:225-233): a floor under a ring's intra-node hop once the ring
// spans nodes, three times that for Simple.
constexpr double kNetOverheadUs = 1.0;
// The ring's large-message latency factor on Ampere and later, Simple all-reduce across nodes (tuning.cc:647-650).
constexpr double kRingPlateau = 1.4;
// treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B .. 256 MiB (tuning.cc:620-646).
constexpr double kTreeCorrection[kProtocols][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

int floor_log2(int value) {
  int bits = 0;
  while ((2 << bits) <= value) ++bits;
  return bits;
}

}  // namespace

std::string_view to_string(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::ll: return "LL";
    case NcclProtocol::ll128: return "LL128";
    case NcclProtocol::simple: break;
  }
  return "Simple";
}

bool nccl_supports(NcclAlgorithm algorithm, NcclProtocol protocol, OpKind kind, const GroupSpan& span,
                   const NcclHops& hops) {
  if (protocol == NcclProtocol::ll128 && !hops.intra_nvlink) return false;
  if (algorithm == NcclAlgorithm::tree) return kind == OpKind::all_reduce && span.nodes > 1;
  return kind == OpKind::all_reduce || kind == OpKind::all_gather || kind == OpKind::reduce_scatter;
}

double nccl_latency_us(NcclAlgorithm algorithm, NcclProtocol protocol, OpKind kind, const GroupSpan& span,
                       const NcclHops& hops) {
  const int n = std::max(span.size, 1), nodes = std::max(span.nodes, 1);
  const int per_node = std::clamp(span.ranks_per_node, 1, n);
  const double base = kBaseLatency[a(algorithm)][p(protocol)];
  double intra = (hops.intra_nvlink ? kNvlinkLatency : kPcieLatency)[a(algorithm)][p(protocol)];
  // One GPU per node: the network hop takes the tree's latency (tuning.cc:386-388).
  const double network = kNetworkLatency[per_node == 1 ? a(NcclAlgorithm::tree) : a(algorithm)][p(protocol)];
  if (algorithm == NcclAlgorithm::tree)
    return base + 2 * ((per_node - 1) * intra + floor_log2(nodes) * network);
  const bool all_reduce = kind == OpKind::all_reduce;
  // The ring's steps, and those of them that cross nodes: the same count over a ring of the nodes.
  const int steps = algorithm_steps(kind, n);
  const int network_steps = nodes > 1 ? algorithm_steps(kind, nodes) : 0;
  if (nodes > 1) intra = std::max(intra, kNetOverheadUs * (protocol == NcclProtocol::simple ? 3 : 1));
  const double latency = base + (steps - network_steps) * intra + network_steps * network;
  return all_reduce && nodes > 1 && protocol == NcclProtocol::simple ? kRingPlateau * latency : latency;
}

double nccl_bandwidth_factor(NcclAlgorithm algorithm, NcclProtocol protocol, double bytes, double ceiling_share) {
  if (algorithm == NcclAlgorithm::ring) {
    switch (protocol) {
      case NcclProtocol::ll: return std::min(0.5, ceiling_share);
      case NcclProtocol::ll128: return std::min(0.92, ceiling_share);
      case NcclProtocol::simple: return std::min(1.0, ceiling_share);
    }
  }
  double factor = 0.92;
  if (protocol == NcclProtocol::ll) factor /= 3.8;
  if (protocol == NcclProtocol::ll128) factor *= 120.0 / 128.0;
  const int index = std::clamp(static_cast<int>(std::floor(std::log2(std::max(bytes, 64.0) / 64))), 0, 22);
  return std::min(factor, ceiling_share) * kTreeCorrection[p(protocol)][index];
}

}  // namespace twin::sim
