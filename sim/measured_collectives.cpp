// The flow's bytes are "effective bytes": (T - latency) x capacity, so that the engine's equal-share
// rule applies to the measured collective exactly as to a modelled one, with no change to the engine.
#include "sim/measured_collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cost/collective_tables.hpp"
#include "cost/collective_steps.hpp"
#include "cost/measurement_stats.hpp"

namespace twin::sim {

CollectivePlan measured_collective_plan(const CollectiveTable& table, Bytes bytes, const LinkParams& links) {
  CollectivePlan plan;
  plan.algorithm = "measured";
  if (bytes <= 0) return plan;
  const double message_bytes = static_cast<double>(bytes);
  const double time_ns = collective_table_time_us(table, message_bytes) * kNsPerUs;
  const double fitted_latency_ns =
      algorithm_steps(table.collective, table.group_size) * table.fit.latency_us * kNsPerUs;
  const auto latency_ns = static_cast<TimeNs>(std::llround(std::min(fitted_latency_ns, time_ns)));
  std::uint8_t mask = 0;
  if (table.ranks_per_node > 1) mask |= kIntraLink;
  if (table.nodes > 1) mask |= kInterLink;
  double capacity_GBps = std::numeric_limits<double>::infinity();  // bytes per ns, as the engine rates flows
  for (int link = 0; link < kLinkKindCount; ++link)
    if (mask & (1 << link))
      capacity_GBps = std::min(capacity_GBps, links.bandwidth_GBps[link] * links.efficiency[link].at(message_bytes));
  const double transfer_ns = std::max(0.0, time_ns - static_cast<double>(latency_ns));
  CollectivePhase& phase = plan.phases[plan.phase_count++];
  phase.latency_ns = latency_ns;
  phase.flows[0] = {capacity_GBps > 0 ? transfer_ns * capacity_GBps : 0.0, mask};
  phase.flow_count = 1;
  return plan;
}

const CollectiveTable* measured_collective(const Profile& profile, std::string_view gpu, OpKind kind,
                                           const GroupSpan& span) {
  if (profile.collectives.empty()) return nullptr;
  return find_collective_table(profile.collectives, gpu, kind, span.size, span.ranks_per_node, span.nodes);
}

const CollectiveTable* measured_point_to_point(const Profile& profile, std::string_view gpu, LinkKind link) {
  if (profile.collectives.empty()) return nullptr;
  const bool intra = link == LinkKind::intra_node;
  return find_collective_table(profile.collectives, gpu, OpKind::send, 2, intra ? 2 : 1, intra ? 1 : 2);
}

}  // namespace twin::sim
