// Collective algorithms as link traffic. Each algorithm turns (OpKind, bytes, GroupSpan) into phases
// that run one after another; a phase is a step latency followed by flows of bytes on the intra-node
// link, the inter-node link or both. Bytes follow nccl-tests (all_reduce: the buffer; reduce_scatter:
// total input; all_gather: total output; all_to_all: per-rank send buffer), so that with n ranks at
// link bandwidth B a ring all_reduce of S bytes takes 2(n-1)/n*S/B + 2(n-1)*latency.
//
// With r ranks per node over k nodes (n = r*k):
//   ring         one ring through all n ranks, one phase: AR 2(n-1)/n*S over 2(n-1) steps, RS/AG
//                (n-1)/n*S over n-1 steps. Inside one node it uses the intra link, with one rank per
//                node the inter link; mixed, every rank forwards the whole ring's traffic and the ring's
//                node-crossing hops are its bottleneck, so the flow crosses both links (moving at the
//                slower) and each step waits for the slower link's latency.
//   hierarchical mixed spans only, as 2D rings: AR = intra RS (r-1)/r*S, inter AR 2(k-1)/k*S/r among the
//                ranks of equal local index, intra AG (r-1)/r*S; RS = the first two (inter RS
//                (k-1)/k*S/r); AG = inter AG (k-1)/k*S/r then intra AG (r-1)/r*S.
//   tree         all_reduce over k > 1 nodes, NCCL's model: a chain inside each node and a double binary
//                tree across nodes, pipelined; algorithm bandwidth is half the bus bandwidth (2*S moved
//                at the slower link), latency 2(r-1) intra steps + 2*ceil(log2 k) inter steps.
//   all_to_all   direct: every rank sends (r-1)/n*S to its node peers and (n-r)/n*S to the others, both
//                at once in one phase; one step at the slowest link's latency.
// The tuner evaluates every algorithm that supports the collective in isolation (no contention) and
// keeps the fastest; ties keep the earlier of ring, hierarchical, tree, all_to_all. Point-to-point
// transfers (pipeline send/recv, ring-attention sends) are one phase of one step on one link.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>

#include "calibrate/profile.hpp"
#include "core/op.hpp"
#include "core/op_graph.hpp"
#include "core/units.hpp"

namespace twin::sim {

inline constexpr int kLinkKindCount = 2;
inline constexpr int link_index(LinkKind kind) { return kind == LinkKind::intra_node ? 0 : 1; }

// What a class's GPUs offer to collectives: per-GPU, per-direction bandwidth of each link kind, the
// per-step latency and the efficiency curve (indexed by link_index).
struct LinkParams {
  std::array<double, kLinkKindCount> bandwidth_GBps{};
  std::array<TimeNs, kLinkKindCount> step_latency_ns{};
  std::array<SaturatingEfficiency, kLinkKindCount> efficiency{};
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
  std::string_view algorithm;            // "ring", "hierarchical", "tree", "all_to_all", "p2p", "none"
  std::array<CollectivePhase, 3> phases{};
  int phase_count = 0;
};

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(OpKind kind, const GroupSpan& span) const = 0;
  // Precondition: supports(kind, span), span.size > 1, bytes > 0.
  virtual CollectivePlan plan(OpKind kind, double bytes, const GroupSpan& span, const LinkParams& links) const = 0;
};

class RingAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "ring"; }
  bool supports(OpKind kind, const GroupSpan& span) const override;
  CollectivePlan plan(OpKind kind, double bytes, const GroupSpan& span, const LinkParams& links) const override;
};

class HierarchicalAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "hierarchical"; }
  bool supports(OpKind kind, const GroupSpan& span) const override;
  CollectivePlan plan(OpKind kind, double bytes, const GroupSpan& span, const LinkParams& links) const override;
};

class TreeAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "tree"; }
  bool supports(OpKind kind, const GroupSpan& span) const override;
  CollectivePlan plan(OpKind kind, double bytes, const GroupSpan& span, const LinkParams& links) const override;
};

class AllToAllAlgorithm final : public CollectiveAlgorithm {
 public:
  std::string_view name() const override { return "all_to_all"; }
  bool supports(OpKind kind, const GroupSpan& span) const override;
  CollectivePlan plan(OpKind kind, double bytes, const GroupSpan& span, const LinkParams& links) const override;
};

// Time of a plan with the links to itself: per phase, latency plus the slowest flow, each flow at the
// bandwidth times efficiency (at `message_bytes`) of the slower link it crosses.
double isolated_time_ns(const CollectivePlan& plan, double message_bytes, const LinkParams& links);

// The fastest supporting algorithm's plan (the tuner). Group size 1 or zero bytes: a plan with no phases.
// Throws std::logic_error for a kind that is not a collective (send, recv, compute).
CollectivePlan tune_collective(OpKind kind, Bytes bytes, const GroupSpan& span, const LinkParams& links);

// A point-to-point transfer of `bytes` on one link: one step, one flow. Zero bytes: no phases.
CollectivePlan point_to_point_plan(Bytes bytes, LinkKind link, const LinkParams& links);

}  // namespace twin::sim
