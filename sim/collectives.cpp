// The traffic of NCCL's ring and tree and of the direct all-to-all (formulas in the header), and the tuner.
#include "sim/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "cost/collective_steps.hpp"
#include "sim/ring_pace.hpp"

namespace twin::sim {
namespace {

// Placement of a group: n ranks, r per node, k nodes (clamped to something meaningful).
struct Placement {
  int n, r, k;
};

Placement placement_of(const GroupSpan& span) {
  const int n = std::max(span.size, 1);
  return {n, std::clamp(span.ranks_per_node, 1, n), std::max(span.nodes, 1)};
}

TimeNs slowest_latency_ns(std::uint8_t links, const LinkParams& params) {
  TimeNs latency = 0;
  if (links & kIntraLink) latency = std::max(latency, params.step_latency_ns[0]);
  if (links & kInterLink) latency = std::max(latency, params.step_latency_ns[1]);
  return latency;
}

// One phase: NCCL's latency, then a flow on each link that carries bytes (zero-byte flows left out).
CollectivePlan one_phase(std::string_view algorithm, NcclProtocol protocol, double latency_us, double intra_bytes,
                         double inter_bytes) {
  CollectivePlan plan;
  plan.algorithm = algorithm;
  plan.protocol = to_string(protocol);
  CollectivePhase& phase = plan.phases[plan.phase_count++];
  phase.latency_ns = static_cast<TimeNs>(std::llround(latency_us * kNsPerUs));
  if (intra_bytes > 0) phase.flows[phase.flow_count++] = {intra_bytes, kIntraLink};
  if (inter_bytes > 0) phase.flows[phase.flow_count++] = {inter_bytes, kInterLink};
  return plan;
}

// Every rank sends to the others at once, no NCCL algorithm: one phase, a flow on each link that carries bytes, the
// slower link's latency.
CollectivePlan direct_exchange(std::string_view algorithm, double intra_bytes, double inter_bytes,
                               const LinkParams& links) {
  CollectivePlan plan;
  plan.algorithm = algorithm;
  CollectivePhase& phase = plan.phases[plan.phase_count++];
  std::uint8_t used = 0;
  if (intra_bytes > 0) {
    phase.flows[phase.flow_count++] = {intra_bytes, kIntraLink};
    used |= kIntraLink;
  }
  if (inter_bytes > 0) {
    phase.flows[phase.flow_count++] = {inter_bytes, kInterLink};
    used |= kInterLink;
  }
  phase.latency_ns = slowest_latency_ns(used, links);
  return plan;
}

// NCCL's graph bus bandwidth over these links (the header's formula): what its ceilings are a share of.
double links_bus_GBps(const Placement& p, const LinkParams& links) {
  const double intra = links.bandwidth_GBps[0] * links.efficiency[0].peak;
  if (p.k == 1) return intra;
  const double inter = links.bandwidth_GBps[1] * links.efficiency[1].peak * p.r;
  return p.r > 1 ? std::min(intra * p.r / (p.r - 1), inter) : inter;
}

}  // namespace

CollectivePlan nccl_plan(NcclAlgorithm algorithm, NcclProtocol protocol, OpKind kind, double bytes,
                         const GroupSpan& span, const LinkParams& links) {
  const Placement p = placement_of(span);
  const NcclHops hops{links.intra_nvlink};
  const double latency_us = nccl_latency_us(algorithm, protocol, kind, span, hops);
  const double ceiling_GBps = nccl_bus_ceiling_GBps(algorithm, protocol, span, links.generation, links.net_channels);
  const double bus_GBps = links_bus_GBps(p, links);
  const double efficiency =
      nccl_bandwidth_factor(algorithm, protocol, bytes, bus_GBps > 0 ? ceiling_GBps / bus_GBps : kNoCeiling);
  if (algorithm == NcclAlgorithm::tree) {
    const double node_bytes = 2.0 * bytes * (p.k - 1) / p.k;
    return one_phase("tree", protocol, latency_us, 2.0 * bytes * (p.r - 1) / p.r / efficiency,
                     node_bytes / p.r / efficiency);
  }
  // The ring's steps (cost/collective_steps.hpp) of S/n each, stretched by the protocol's efficiency.
  const double traffic = algorithm_steps(kind, p.n) * bytes / p.n / efficiency;
  if (p.k == 1) return one_phase("ring", protocol, latency_us, traffic, 0);
  CollectivePlan plan = one_phase("ring", protocol, latency_us, traffic * (p.r - 1) / p.r, traffic / p.r);
  // A ring across nodes steps no faster than its measured pace (sim/ring_pace.hpp): the steps' wait is latency.
  const double floor_ns = ring_pace_floor_ns(kind, span);
  const double alone_ns = isolated_time_ns(plan, bytes, links);
  if (floor_ns > alone_ns) plan.phases[0].latency_ns += static_cast<TimeNs>(std::llround(floor_ns - alone_ns));
  return plan;
}

CollectivePlan all_to_all_plan(double bytes, const GroupSpan& span, const LinkParams& links) {
  const Placement p = placement_of(span);
  return direct_exchange("all_to_all", (p.r - 1) * bytes / p.n, (p.n - p.r) * bytes / p.n, links);
}

double dispatch_hit_probability(int experts, int top_k, int held) {
  // C(E-m, k)/C(E, k) = prod over i < k of (E-m-i)/(E-i): the chance that none of the k picks is one of the m.
  double miss = 1.0;
  for (int i = 0; i < top_k; ++i) miss *= std::max(0.0, static_cast<double>(experts - held - i) / (experts - i));
  return 1.0 - miss;
}

CollectivePlan deduplicated_dispatch_plan(double token_bytes, int experts, int top_k, const GroupSpan& span,
                                          const LinkParams& links) {
  const Placement p = placement_of(span);
  const int per_rank = std::max(experts / p.n, 1);
  const double rank_hit = dispatch_hit_probability(experts, top_k, per_rank);
  const double node_hit = dispatch_hit_probability(experts, top_k, per_rank * p.r);
  const double intra = token_bytes * p.k * (p.r - 1) * rank_hit;
  const double inter = token_bytes * (p.k - 1) * node_hit;
  return direct_exchange("dedup_all_to_all", intra, inter, links);
}

double isolated_time_ns(const CollectivePlan& plan, double message_bytes, const LinkParams& links) {
  double total = 0;
  for (int i = 0; i < plan.phase_count; ++i) {
    const CollectivePhase& phase = plan.phases[i];
    double slowest_flow = 0;
    for (int f = 0; f < phase.flow_count; ++f) {
      const CollectiveFlow& flow = phase.flows[f];
      double bandwidth = std::numeric_limits<double>::infinity();
      for (int link = 0; link < kLinkKindCount; ++link) {
        if (flow.links & (1 << link))
          bandwidth = std::min(bandwidth, links.bandwidth_GBps[link] * links.efficiency[link].at(message_bytes));
      }
      const double time = bandwidth > 0 ? flow.bytes / bandwidth : std::numeric_limits<double>::infinity();
      slowest_flow = std::max(slowest_flow, time);
    }
    total += static_cast<double>(phase.latency_ns) + slowest_flow;
  }
  return total;
}

CollectivePlan tune_collective(OpKind kind, Bytes bytes, const GroupSpan& span, const LinkParams& links) {
  if (!(kind >= OpKind::all_reduce && kind <= OpKind::all_to_all))
    throw std::logic_error("tune_collective: " + to_string(kind) + " is not a collective");
  if (span.size <= 1 || bytes <= 0) return CollectivePlan{"none", "", {}, 0};
  const double message_bytes = static_cast<double>(bytes);
  if (kind == OpKind::all_to_all) return all_to_all_plan(message_bytes, span, links);
  const NcclHops hops{links.intra_nvlink};
  CollectivePlan best;
  double best_ns = std::numeric_limits<double>::infinity();
  for (NcclAlgorithm algorithm : {NcclAlgorithm::tree, NcclAlgorithm::ring})
    for (NcclProtocol protocol : kNcclProtocols) {
      if (!nccl_supports(algorithm, protocol, kind, span, hops)) continue;
      CollectivePlan candidate = nccl_plan(algorithm, protocol, kind, message_bytes, span, links);
      const double time = isolated_time_ns(candidate, message_bytes, links);
      if (time < best_ns) {
        best = candidate;
        best_ns = time;
      }
    }
  return best;
}

CollectivePlan collective_plan(const Op& op, const GroupSpan& span, const LinkParams& links) {
  if (op.kind == OpKind::all_to_all && op.dispatch_experts > 0 && span.size > 1 && op.bytes > 0)
    return deduplicated_dispatch_plan(static_cast<double>(op.bytes), op.dispatch_experts, op.dispatch_top_k, span,
                                      links);
  return tune_collective(op.kind, op.bytes, span, links);
}

CollectivePlan point_to_point_plan(Bytes bytes, LinkKind link, const LinkParams& links) {
  CollectivePlan plan;
  plan.algorithm = "p2p";
  if (bytes <= 0) return plan;
  const int index = link_index(link);
  CollectivePhase& phase = plan.phases[plan.phase_count++];
  phase.latency_ns = links.step_latency_ns[index];
  phase.flows[phase.flow_count++] = {static_cast<double>(bytes), static_cast<std::uint8_t>(1 << index)};
  return plan;
}

}  // namespace twin::sim
