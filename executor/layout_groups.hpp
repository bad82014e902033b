// The process groups a plan's layouts need beyond its strategy's: a per-layer plan's layers (and the embedding
// and output layer beside them) move their tensors in TP or Ulysses groups of their own sizes and reduce their
// weights over data groups of their own; each such size is a uniform strategy over the same stages, whose
// groups (strategies/rank_layout.hpp) the communicators split (executor/gpu/communicators.hpp).
#pragma once
#include <vector>

#include "core/strategy.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin::exec {

// One strategy per tensor-parallel (or Ulysses) group size the plan's units use other than its strategy's,
// ascending: the strategy with that TP size and the data-parallel size that fills the stage. Empty for a plan
// of one layout.
std::vector<Strategy> other_layouts(const PlanGraphs& lowered);

}  // namespace twin::exec
