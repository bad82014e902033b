#include "executor/explicit_groups.hpp"

#include <optional>
#include <stdexcept>

#include "strategies/families/rank_plan.hpp"

namespace twin::exec {

ExplicitGroups explicit_groups(const StageGroups& groups, const std::vector<PipelineReduction>& reductions) {
  ExplicitGroups out;
  out.tensor = groups.tensor;
  out.pipeline = groups.norm;
  for (const StageGroups::Boundary& from : groups.boundaries) {
    ExplicitGroups::Boundary& boundary = out.boundaries.emplace_back();
    boundary.from_stage = from.from_stage;
    boundary.to_stage = from.to_stage;
    boundary.groups = from.groups;
    for (std::size_t g = 0; g < from.groups.size(); ++g)
      boundary.sides.push_back(
          {from.senders[g], from.receivers[g], from.senders_sharded[g], from.receivers_sharded[g]});
  }
  out.reduction_rounds = reduction_group_rounds(reductions);
  out.stage_of_rank = groups.stage_of_rank;
  return out;
}

ExplicitGroups explicit_groups(const PlanGraphs& lowered, const std::vector<PipelineReduction>& reductions) {
  const std::optional<StageGroups> groups = stage_groups(lowered);
  if (!groups) throw std::logic_error("explicit_groups: the plan's parts lay their GPUs out as uniform strategies");
  return explicit_groups(*groups, reductions);
}

}  // namespace twin::exec
