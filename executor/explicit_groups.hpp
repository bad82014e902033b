// The process groups of a plan whose family states them (strategies/families/rank_plan.hpp's stage_groups: an
// asymmetric plan's stages of their own TP sizes), which twin execute's communicators split from the world
// (executor/gpu/communicators.hpp): each list holds disjoint groups of global ranks, each group in its members'
// order, so that one split serves a list. Plain values, no GPU; every rank computes the same.
#pragma once
#include <vector>

#include "executor/pipeline_reduction.hpp"
#include "executor/stage_boundary.hpp"

namespace twin {
struct StageGroups;  // strategies/families/rank_plan.hpp
}

namespace twin::exec {

struct ExplicitGroups {
  std::vector<std::vector<int>> tensor;    // each stage's GPUs (its TP group)
  std::vector<std::vector<int>> pipeline;  // the GPUs each gradient norm sums over (a pipeline's; ZeRO-1: all)
  // A boundary from stage `from_stage` to `to_stage` in every pipeline that has it: the sending stage's GPUs,
  // then the receiving stage's, and the two sides as stage_boundary.hpp moves rows between them.
  struct Boundary {
    int from_stage = 0, to_stage = 0;
    std::vector<std::vector<int>> groups;
    std::vector<BoundarySides> sides;  // per group
  };
  std::vector<Boundary> boundaries;  // forward pairs then backward pairs, by stage
  // The reductions' holder sets (reduction_group_rounds).
  std::vector<std::vector<std::vector<int>>> reduction_rounds;
  std::vector<int> stage_of_rank;  // by global rank: its stage in its pipeline
};

// The family's groups with the reductions' holder sets.
ExplicitGroups explicit_groups(const StageGroups& groups, const std::vector<PipelineReduction>& reductions);
// The same for a plan whose family states its groups; throws std::logic_error for another.
ExplicitGroups explicit_groups(const PlanGraphs& lowered, const std::vector<PipelineReduction>& reductions);

}  // namespace twin::exec
