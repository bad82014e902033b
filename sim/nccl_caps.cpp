// NCCL 2.30.7's ceilings (src/graph/tuning.cc:177-211, applied at 325-337) by generation and node count.
#include "sim/nccl_caps.hpp"

#include <algorithm>

#include "cost/profile.hpp"

namespace twin::sim {
namespace {

// Columns: one node, two nodes, more (tuning.cc's index2). Rows: Ampere, Hopper, Blackwell.
constexpr int kGenerations = 3;
struct PerNodeCount {
  double one, two, more;
  double at(int nodes) const { return nodes <= 1 ? one : nodes == 2 ? two : more; }
};
// llMaxBws: one node by generation; across nodes the Intel row (Volta-N1/Intel-N2/Intel-N4).
constexpr double kLlMaxOneNode[kGenerations] = {87.7, 141.0, 282.0};
constexpr PerNodeCount kLlMaxIntel{0, 39.0, 20.4};
constexpr double kRingLl128PerChannel[kGenerations] = {20.0, 36.7, 40.0};
constexpr PerNodeCount kTreeLl128PerChannel[kGenerations] = {{20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr PerNodeCount kTreePerChannel[kGenerations] = {{24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};

int row(NcclGeneration generation) { return static_cast<int>(generation) - 1; }

double ll_max_GBps(NcclGeneration generation, int nodes) {
  return nodes <= 1 ? kLlMaxOneNode[row(generation)] : kLlMaxIntel.at(nodes);
}

}  // namespace

NcclGeneration nccl_generation(std::string_view gpu_name) {
  const std::string family = gpu_family(gpu_name);
  if (family == "hopper") return NcclGeneration::hopper;
  if (family == "blackwell") return NcclGeneration::blackwell;
  if (family == "ampere" || family == "ampere-consumer" || family == "ada") return NcclGeneration::ampere;
  return NcclGeneration::unknown;
}

double nccl_bus_ceiling_GBps(NcclAlgorithm algorithm, NcclProtocol protocol, const GroupSpan& span,
                             NcclGeneration generation, int channels) {
  if (generation == NcclGeneration::unknown) return kNoCeiling;
  const int nodes = std::max(span.nodes, 1), g = row(generation);
  const double ll_max = ll_max_GBps(generation, nodes);
  // Per-channel ceilings across nodes only (the header says why).
  const double per_channel = nodes > 1 ? std::max(channels, 1) : kNoCeiling;
  if (algorithm == NcclAlgorithm::ring) {
    switch (protocol) {
      case NcclProtocol::ll: return ll_max;
      case NcclProtocol::ll128: return per_channel * kRingLl128PerChannel[g];
      case NcclProtocol::simple: return kNoCeiling;
    }
  }
  const double tree = per_channel * kTreePerChannel[g].at(nodes);
  switch (protocol) {
    case NcclProtocol::ll: return std::min(tree / 3.8, ll_max);
    case NcclProtocol::ll128: return std::min(tree * 120.0 / 128.0, per_channel * kTreeLl128PerChannel[g].at(nodes));
    case NcclProtocol::simple: break;
  }
  return tree;
}

}  // namespace twin::sim
