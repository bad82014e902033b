// The flow's bytes are "effective bytes": (T - latency) x capacity, so that the engine's equal-share
// rule applies to the measured collective exactly as to a modelled one, with no change to the engine.
#include "sim/measured_collectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "cost/collective_tables.hpp"
#include "cost/collective_steps.hpp"
#include "cost/measurement_stats.hpp"

namespace twin::sim {

namespace {

// The plan of a measured time: the table's fitted latency (at most the time) and one flow over the links its
// placement spans whose bytes take the rest at their capacity for a message of `bytes`.
CollectivePlan plan_of_time(const CollectiveTable& table, double time_ns, Bytes bytes, const LinkParams& links) {
  CollectivePlan plan;
  plan.algorithm = "measured";
  if (bytes <= 0) return plan;
  const double message_bytes = static_cast<double>(bytes);
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

// Time in blocks from the measured (blocks, time) points, ascending in blocks, the first of one block.
double time_in_blocks_us(const std::vector<std::pair<int, double>>& points, int blocks) {
  for (std::size_t i = 1; i < points.size(); ++i) {
    if (blocks > points[i].first && i + 1 < points.size()) continue;
    const auto [b0, t0] = points[i - 1];
    const auto [b1, t1] = points[i];
    if (blocks > b1)  // beyond the most measured: linear in blocks through the last two
      return t1 + (t1 - t0) * (blocks - b1) / static_cast<double>(b1 - b0);
    const double w = std::log(static_cast<double>(blocks) / b0) / std::log(static_cast<double>(b1) / b0);
    return t0 + w * (t1 - t0);
  }
  return points.front().second;
}

}  // namespace

CollectivePlan measured_collective_plan(const CollectiveTable& table, Bytes bytes, const LinkParams& links) {
  if (bytes <= 0) return plan_of_time(table, 0, bytes, links);
  return plan_of_time(table, collective_table_time_us(table, static_cast<double>(bytes)) * kNsPerUs, bytes, links);
}

CollectivePlan measured_blocks_plan(const Profile& profile, const CollectiveTable& one_block, int blocks_per_peer,
                                    Bytes bytes, const LinkParams& links) {
  if (bytes <= 0) return plan_of_time(one_block, 0, bytes, links);
  const double size = static_cast<double>(bytes);
  std::vector<std::pair<int, double>> points{{1, collective_table_time_us(one_block, size)}};
  for (const CollectiveTable& t : profile.collectives)
    if (t.blocks_per_peer > 1 &&  // a table in blocks of this placement and GPU (the first of its block count)
        find_collective_table(profile.collectives, one_block.gpu, OpKind::all_to_all, one_block.group_size,
                              one_block.ranks_per_node, one_block.nodes, t.blocks_per_peer) == &t)
      points.emplace_back(t.blocks_per_peer, collective_table_time_us(t, size));
  std::sort(points.begin(), points.end());
  const double time_us = points.size() == 1 || blocks_per_peer <= 1 ? points.front().second
                                                                    : time_in_blocks_us(points, blocks_per_peer);
  return plan_of_time(one_block, time_us * kNsPerUs, bytes, links);
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
