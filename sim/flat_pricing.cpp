// Prices and plans of ops alone, for flattening and the lower bound's compute_busy.
#include "sim/flat_pricing.hpp"

#include <cmath>
#include <stdexcept>

#include "sim/measured_collectives.hpp"

namespace twin::sim {
namespace {

// A collective priced by the algorithm models (no measured table) on GPUs whose kernel profile carries
// a fitted correction for its kind runs `factor` times as long alone: every phase's latency and bytes
// scale by it (profile.hpp, KindCorrection).
void apply_correction(CollectivePlan& plan, const Profile& profile, const GpuSpec& gpu, OpKind kind) {
  if (profile.gpus.empty()) return;
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  if (kernels.corrections.empty()) return;
  auto correction = kernels.corrections.find(to_string(kind));
  if (correction == kernels.corrections.end()) return;
  const double factor = correction->second.factor;
  for (int p = 0; p < plan.phase_count; ++p) {
    CollectivePhase& phase = plan.phases[p];
    phase.latency_ns = static_cast<TimeNs>(std::llround(static_cast<double>(phase.latency_ns) * factor));
    for (int f = 0; f < phase.flow_count; ++f) phase.flows[f].bytes *= factor;
  }
}

}  // namespace

std::string describe(const IterationGraph& graph, int rank_class, OpIndex index) {
  const RankClass& lowered = graph.classes[rank_class];
  // A graph lowered class by class holds one class's ops at a time: the others' are named by id (a lowering bug
  // found that way is found again by the whole path, whose errors name them: strategies/class_by_class.hpp).
  if (index >= lowered.size()) return op_id(rank_class, index);
  return op_id(rank_class, index) + " (" + op_name(lowered.op(index)) + ")";
}

void require_links(const CollectivePlan& plan, const LinkParams& links, const OpRef& op) {
  for (int p = 0; p < plan.phase_count; ++p) {
    for (int f = 0; f < plan.phases[p].flow_count; ++f) {
      for (int link = 0; link < kLinkKindCount; ++link) {
        if ((plan.phases[p].flows[f].links & (1 << link)) && !(links.bandwidth_GBps[link] > 0))
          throw std::invalid_argument(op.describe() + " needs the " + (link == 0 ? "intra" : "inter") +
                                      "-node link, which has no bandwidth on this cluster");
      }
    }
  }
}

std::uint32_t PlanTable::collective(const Op& op, const GroupSpan& span, const OpRef& what) {
  const int routing = op.dispatch_experts << 16 | op.dispatch_top_k;
  const int blocks = op.kind == OpKind::all_to_all ? op.blocks_per_peer : 1;
  const Key key{static_cast<int>(op.kind), op.bytes, span.size, span.ranks_per_node, span.nodes, routing, blocks};
  return find_or_add(key, [&] {
    // The profile's tables and corrections describe NCCL's kernels, not the flex dispatcher's (routing != 0).
    if (routing != 0) return collective_plan(op, span, flat_.links);
    const CollectiveTable* table = span.size > 1 ? measured_collective(profile_, gpu_.name, op.kind, span) : nullptr;
    if (table && blocks > 1)
      return measured_blocks_plan(profile_, *table, blocks, op.bytes, flat_.links);
    if (table) return measured_collective_plan(*table, op.bytes, flat_.links);
    CollectivePlan plan = collective_plan(op, span, flat_.links);
    apply_correction(plan, profile_, gpu_, op.kind);
    return plan;
  }, what);
}

std::uint32_t PlanTable::point_to_point(Bytes bytes, LinkKind link, const OpRef& what) {
  return find_or_add({-1 - link_index(link), bytes, 0, 0, 0, 0, 1}, [&] {
    const CollectiveTable* table = measured_point_to_point(profile_, gpu_.name, link);
    return table ? measured_collective_plan(*table, bytes, flat_.links) : point_to_point_plan(bytes, link, flat_.links);
  }, what);
}

template <class MakePlan>
std::uint32_t PlanTable::find_or_add(const Key& key, MakePlan make_plan, const OpRef& what) {
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  CollectivePlan plan = make_plan();
  require_links(plan, flat_.links, what);
  const auto index = static_cast<std::uint32_t>(flat_.plans.size());
  flat_.plans.push_back(plan);
  index_.emplace(key, index);
  return index;
}

std::uint32_t communication_plan(const IterationGraph& graph, int c, OpIndex i, PlanTable& plans) {
  const RankClass& rank_class = graph.classes[c];
  const Op& op = rank_class.op(i);
  if (is_ring_send(op)) {
    const bool crosses_nodes = rank_class.spans[static_cast<int>(op.group)].nodes > 1;
    return plans.point_to_point(op.bytes, crosses_nodes ? LinkKind::inter_node : LinkKind::intra_node,
                                OpRef{graph, c, i});
  }
  if (op.group == GroupKind::none) throw std::logic_error(describe(graph, c, i) + ": a collective needs a group");
  const GroupSpan* span = rank_class.span_of(op.group, op.group_size);
  if (!span)
    throw std::logic_error(describe(graph, c, i) + ": group_size " + std::to_string(op.group_size) + " but the " +
                           to_string(op.group) + " span has size " +
                           std::to_string(rank_class.spans[static_cast<int>(op.group)].size));
  return plans.collective(op, *span, OpRef{graph, c, i});
}

}  // namespace twin::sim
