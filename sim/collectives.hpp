// Collectives as link traffic, the way NCCL runs them (sim/nccl_model.hpp holds NCCL's own latency and
// bandwidth model). A plan is phases run one after another; a phase is a latency followed by flows of bytes
// on the intra-node link, the inter-node link or both, which share the links with other traffic in the
// engine. Bytes follow nccl-tests (all_reduce: the buffer; reduce_scatter: total input; all_gather: total
// output; all_to_all: per-rank send buffer). A GPU's traffic B is the ring's bus traffic: 2(n-1)/n S for an
// all-reduce over n ranks, (n-1)/n S for reduce-scatter and all-gather.
//
// With r ranks per node over k nodes (n = r k), every NCCL channel a ring through all n ranks, one NIC per
// channel (rail-optimized: a GPU's own NIC):
//   ring   one phase, NCCL's ring latency; B over NVLink inside one node, over the NIC with one rank per node;
//          across nodes the ring crosses each node once per channel, so a GPU moves B (r-1)/r over NVLink and
//          B / r over its NIC, both at once (NCCL's bus bandwidth is then the node's NICs: 8 x 24 = 192 GB/s
//          for a DGX A100 with 8 HDR NICs).
//   tree   all-reduce across nodes: a chain inside each node, NCCL's double binary tree across nodes; a node
//          sends and receives 2S (k-1)/k over its NICs (S up the trees, S down; half of that on 2 nodes, where
//          each node is a root), a GPU 1/r of it, and 2S (r-1)/r over NVLink for the chain.
//   all_to_all   direct: every rank sends (r-1)/n S to its node peers and (n-r)/n S to the others, both at
//          once in one phase; one step at the slowest link's latency (the profile's).
// Each ring and tree runs in NCCL's three protocols: flows carry bytes / (the protocol's bandwidth factor, at
// most NCCL's ceiling for the pair over the links' bus bandwidth: sim/nccl_caps.hpp), the phase NCCL's latency
// for the pair. The links' bus bandwidth is NCCL's graph bandwidth: a GPU's link inside one node; across nodes
// the slower of NVLink carrying (r-1)/r of the ring's traffic and the NIC carrying 1/r, at their peak efficiency. The tuner keeps the pair with the shortest time alone, as NCCL's
// does; ties keep tree before ring, LL before LL128 before Simple. Point-to-point transfers (pipeline
// send/recv, ring-attention and TP ring steps) are one phase of one step on one link.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "cost/profile.hpp"
#include "core/op.hpp"
#include "core/op_graph.hpp"
#include "core/units.hpp"
#include "sim/nccl_caps.hpp"
#include "sim/nccl_model.hpp"

namespace twin::sim {

inline constexpr int kLinkKindCount = 2;
inline constexpr int link_index(LinkKind kind) { return kind == LinkKind::intra_node ? 0 : 1; }

// What a class's GPUs offer to collectives: per-GPU, per-direction bandwidth of each link kind, the
// per-step latency and the efficiency curve (indexed by link_index).
struct LinkParams {
  bool intra_nvlink = true;              // NVLink/NVSwitch inside the node (else PCIe): NCCL's hop latency
  std::array<double, kLinkKindCount> bandwidth_GBps{};
  std::array<TimeNs, kLinkKindCount> step_latency_ns{};
  std::array<SaturatingEfficiency, kLinkKindCount> efficiency{};
  NcclGeneration generation = NcclGeneration::unknown;  // NCCL's ceilings by GPU generation (sim/nccl_caps.hpp)
  int net_channels = 0;                  // NCCL's channels across nodes: one ring per NIC of the node
};

// Link masks of a flow.
inline constexpr std::uint8_t kIntraLink = 1;
inline constexpr std::uint8_t kInterLink = 2;

// Bytes every GPU of the group sends (and receives) in a phase, over the links in `links`.
struct CollectiveFlow {
  double bytes = 0;
  std::uint8_t links = 0;
};

struct CollectivePhase {
  TimeNs latency_ns = 0;                 // algorithm steps of this phase times their link latency
  std::array<CollectiveFlow, 2> flows{};  // concurrent; the phase ends when all have finished
  int flow_count = 0;
};

struct CollectivePlan {
  std::string_view algorithm;            // "ring", "tree", "all_to_all", "p2p", "measured", "none"
  std::string_view protocol;             // NCCL's: "LL", "LL128", "Simple"; empty for the others
  std::array<CollectivePhase, 3> phases{};
  int phase_count = 0;
};

// The plan of one NCCL algorithm and protocol (nccl_supports must hold), and the direct all-to-all.
CollectivePlan nccl_plan(NcclAlgorithm algorithm, NcclProtocol protocol, OpKind kind, double bytes,
                         const GroupSpan& span, const LinkParams& links);
CollectivePlan all_to_all_plan(double bytes, const GroupSpan& span, const LinkParams& links);

// The flex token dispatcher's exchange (DeepEP's normal kernels, HybridEP): `token_bytes` of one rank's tokens, each
// sent once over RDMA to its peer (same local index) on every other node holding one of its experts, then once over
// NVLink from there, or from home, to every rank holding one; combine reduces within the node before it crosses
// back, the same bytes. Routing uniform over `experts` (forced balance: Megatron's random logits), top_k each,
// experts spread evenly over the group: a set of m experts is hit with probability 1 - C(E-m, k)/C(E, k). Per rank
// RDMA carries token_bytes x (nodes-1) x P(node), NVLink token_bytes x nodes x (ranks_per_node-1) x P(rank).
CollectivePlan deduplicated_dispatch_plan(double token_bytes, int experts, int top_k, const GroupSpan& span,
                                          const LinkParams& links);
// The probability that a token routed to top_k of `experts` experts uniformly hits at least one of `held`.
double dispatch_hit_probability(int experts, int top_k, int held);

// Time of a plan with the links to itself: per phase, latency plus the slowest flow, each flow at the
// bandwidth times efficiency (at `message_bytes`) of the slower link it crosses.
double isolated_time_ns(const CollectivePlan& plan, double message_bytes, const LinkParams& links);

// The fastest plan NCCL would run (the tuner). Group size 1 or zero bytes: a plan with no phases.
// Throws std::logic_error for a kind that is not a collective (send, recv, compute).
CollectivePlan tune_collective(OpKind kind, Bytes bytes, const GroupSpan& span, const LinkParams& links);
// An op's plan: the flex dispatcher's deduplicated exchange where the op carries its routing, else the tuner's.
CollectivePlan collective_plan(const Op& op, const GroupSpan& span, const LinkParams& links);

// A point-to-point transfer of `bytes` on one link: one step, one flow. Zero bytes: no phases.
CollectivePlan point_to_point_plan(Bytes bytes, LinkKind link, const LinkParams& links);

}  // namespace twin::sim
