// Where ranks go: Megatron's order (tensor fastest, then context, then data, then pipeline), and how each
// communicator of a stage spans the cluster's nodes.
#pragma once
#include <array>

#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "core/strategy.hpp"

namespace twin {

// Global rank of (tp, cp, dp, pp) coordinates: tp + TP*(cp + CP*(dp + DP*pp)).
int global_rank(const Strategy& s, int tp, int cp, int dp, int pp);
// Spans of every GroupKind for the ranks of pipeline stage `stage` (expert groups are carved from
// data x context ranks, as Megatron does: EP is innermost within them).
std::array<GroupSpan, kGroupKindCount> group_spans(const Strategy& s, const Cluster& cluster, int stage);

}  // namespace twin
