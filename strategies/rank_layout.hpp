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
// Spans of every GroupKind for the ranks of pipeline stage `stage`. GroupKind::data is the group dense
// gradients reduce over: Megatron's data-parallel group with context parallel, dp*cp ranks. Experts are
// not TP-sharded (expert_tensor_parallel_size 1), so as in Megatron's tp-ep-dp-pp expert grid with etp 1,
// EP groups are the innermost ranks of the stage's tp*cp*dp ranks and expert_data groups the rest.
std::array<GroupSpan, kGroupKindCount> group_spans(const Strategy& s, const Cluster& cluster, int stage);
// Replicas of each expert: tp*cp*dp / ep (the group expert gradients reduce over).
int expert_data_parallel_size(const Strategy& s);

}  // namespace twin
