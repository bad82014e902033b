// Traffic and step counts of each collective algorithm (formulas in the header), and the tuner.
#include "sim/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace twin::sim {
namespace {

bool is_reduction_ring_kind(OpKind kind) {
  return kind == OpKind::all_reduce || kind == OpKind::reduce_scatter || kind == OpKind::all_gather;
}

// Placement of a group: n ranks, r per node, k nodes (clamped to something meaningful).
struct Placement {
  int n, r, k;
};

Placement placement_of(const GroupSpan& span) {
  const int n = std::max(span.size, 1);
  return {n, std::clamp(span.ranks_per_node, 1, n), std::max(span.nodes, 1)};
}

std::uint8_t ring_links(const Placement& p) {
  if (p.k == 1) return kIntraLink;
  if (p.r == 1) return kInterLink;
  return kIntraLink | kInterLink;
}

TimeNs slowest_latency_ns(std::uint8_t links, const LinkParams& params) {
  TimeNs latency = 0;
  if (links & kIntraLink) latency = std::max(latency, params.step_latency_ns[0]);
  if (links & kInterLink) latency = std::max(latency, params.step_latency_ns[1]);
  return latency;
}

void add_phase(CollectivePlan& plan, TimeNs latency_ns, CollectiveFlow flow) {
  CollectivePhase& phase = plan.phases[plan.phase_count++];
  phase.latency_ns = latency_ns;
  phase.flows[0] = flow;
  phase.flow_count = 1;
}

int ceil_log2(int value) {
  int steps = 0;
  while ((1 << steps) < value) ++steps;
  return steps;
}

}  // namespace

bool RingAlgorithm::supports(OpKind kind, const GroupSpan&) const { return is_reduction_ring_kind(kind); }

CollectivePlan RingAlgorithm::plan(OpKind kind, double bytes, const GroupSpan& span, const LinkParams& links) const {
  const Placement p = placement_of(span);
  const std::uint8_t mask = ring_links(p);
  const bool all_reduce = kind == OpKind::all_reduce;
  const int steps = all_reduce ? 2 * (p.n - 1) : p.n - 1;
  const double traffic = (all_reduce ? 2.0 : 1.0) * (p.n - 1) * bytes / p.n;
  CollectivePlan plan;
  plan.algorithm = name();
  add_phase(plan, steps * slowest_latency_ns(mask, links), {traffic, mask});
  return plan;
}

bool HierarchicalAlgorithm::supports(OpKind kind, const GroupSpan& span) const {
  const Placement p = placement_of(span);
  return is_reduction_ring_kind(kind) && p.r > 1 && p.k > 1;
}

CollectivePlan HierarchicalAlgorithm::plan(OpKind kind, double bytes, const GroupSpan& span,
                                           const LinkParams& links) const {
  const Placement p = placement_of(span);
  const TimeNs intra_step = links.step_latency_ns[0];
  const TimeNs inter_step = links.step_latency_ns[1];
  const CollectiveFlow intra_half{(p.r - 1) * bytes / p.r, kIntraLink};
  CollectivePlan plan;
  plan.algorithm = name();
  if (kind == OpKind::all_reduce) {
    add_phase(plan, (p.r - 1) * intra_step, intra_half);
    add_phase(plan, 2 * (p.k - 1) * inter_step, {2.0 * (p.k - 1) * bytes / (static_cast<double>(p.k) * p.r), kInterLink});
    add_phase(plan, (p.r - 1) * intra_step, intra_half);
  } else {
    const CollectiveFlow inter{(p.k - 1) * bytes / (static_cast<double>(p.k) * p.r), kInterLink};
    if (kind == OpKind::reduce_scatter) {
      add_phase(plan, (p.r - 1) * intra_step, intra_half);
      add_phase(plan, (p.k - 1) * inter_step, inter);
    } else {
      add_phase(plan, (p.k - 1) * inter_step, inter);
      add_phase(plan, (p.r - 1) * intra_step, intra_half);
    }
  }
  return plan;
}

bool TreeAlgorithm::supports(OpKind kind, const GroupSpan& span) const {
  return kind == OpKind::all_reduce && placement_of(span).k > 1;
}

CollectivePlan TreeAlgorithm::plan(OpKind, double bytes, const GroupSpan& span, const LinkParams& links) const {
  const Placement p = placement_of(span);
  const std::uint8_t mask = p.r > 1 ? (kIntraLink | kInterLink) : kInterLink;
  const TimeNs latency = 2 * (p.r - 1) * links.step_latency_ns[0] + 2 * ceil_log2(p.k) * links.step_latency_ns[1];
  CollectivePlan plan;
  plan.algorithm = name();
  add_phase(plan, latency, {2.0 * bytes, mask});
  return plan;
}

bool AllToAllAlgorithm::supports(OpKind kind, const GroupSpan&) const { return kind == OpKind::all_to_all; }

CollectivePlan AllToAllAlgorithm::plan(OpKind, double bytes, const GroupSpan& span, const LinkParams& links) const {
  const Placement p = placement_of(span);
  CollectivePlan plan;
  plan.algorithm = name();
  CollectivePhase& phase = plan.phases[plan.phase_count++];
  std::uint8_t used = 0;
  if (p.r > 1) {
    phase.flows[phase.flow_count++] = {(p.r - 1) * bytes / p.n, kIntraLink};
    used |= kIntraLink;
  }
  if (p.n > p.r) {
    phase.flows[phase.flow_count++] = {(p.n - p.r) * bytes / p.n, kInterLink};
    used |= kInterLink;
  }
  phase.latency_ns = slowest_latency_ns(used, links);
  return plan;
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
  if (span.size <= 1 || bytes <= 0) return CollectivePlan{"none", {}, 0};
  static const RingAlgorithm ring;
  static const HierarchicalAlgorithm hierarchical;
  static const TreeAlgorithm tree;
  static const AllToAllAlgorithm all_to_all;
  static const CollectiveAlgorithm* const algorithms[] = {&ring, &hierarchical, &tree, &all_to_all};

  const double message_bytes = static_cast<double>(bytes);
  CollectivePlan best;
  double best_ns = std::numeric_limits<double>::infinity();
  bool found = false;
  for (const CollectiveAlgorithm* algorithm : algorithms) {
    if (!algorithm->supports(kind, span)) continue;
    CollectivePlan candidate = algorithm->plan(kind, message_bytes, span, links);
    const double time = isolated_time_ns(candidate, message_bytes, links);
    if (!found || time < best_ns) {
      best = candidate;
      best_ns = time;
      found = true;
    }
  }
  return best;
}

CollectivePlan point_to_point_plan(Bytes bytes, LinkKind link, const LinkParams& links) {
  CollectivePlan plan;
  plan.algorithm = "p2p";
  if (bytes <= 0) return plan;
  const int index = link_index(link);
  add_phase(plan, links.step_latency_ns[index],
            {static_cast<double>(bytes), static_cast<std::uint8_t>(1 << index)});
  return plan;
}

}  // namespace twin::sim
