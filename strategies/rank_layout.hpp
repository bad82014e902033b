// Where ranks go: Megatron's order (tensor fastest, then context, then data, then pipeline), and how each
// communicator of a stage spans the cluster's nodes.
#pragma once
#include <array>
#include <optional>
#include <vector>

#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "core/strategy.hpp"

namespace twin {

// Global rank of (tp, cp, dp, pp) coordinates: tp + TP*(cp + CP*(dp + DP*pp)).
int global_rank(const Strategy& s, int tp, int cp, int dp, int pp);
struct RankCoordinates {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};
RankCoordinates coordinates_of(const Strategy& s, int global_rank);  // the inverse of global_rank

// The one description of which ranks form which group (the simulator measures these groups' spans, the
// executor splits its NCCL communicators by them). tensor: the TP ranks of the same (cp, dp, pp); context:
// the CP ranks; data: the CP x DP ranks of the same (tp, pp); pipeline: one rank per stage; embedding: the
// first and last stage's ranks of the same (tp, cp, dp); expert_tensor, expert and expert_data as group_spans says.
// A rank's group of one kind is named by its first (lowest) rank; `position` is the rank's place in it.
struct GroupSlot {
  int first_rank = 0;
  int position = 0;
};
// nullopt when the rank is in no group of that kind: GroupKind::embedding off the first and last stage.
std::optional<GroupSlot> group_slot(const Strategy& s, GroupKind kind, int global_rank);
// The members of `global_rank`'s group of `kind`, by position (empty when it has none).
std::vector<int> group_members(const Strategy& s, GroupKind kind, int global_rank);

// Spans of every GroupKind for the ranks of pipeline stage `stage`. GroupKind::data is the group dense
// gradients reduce over: Megatron's data-parallel group with context parallel, dp*cp ranks. Experts sit on
// Megatron's folded expert grid etp-ep-edp over the stage's tp*cp*dp ranks: expert_tensor groups are the
// innermost etp ranks, expert groups ep ranks etp apart, expert_data groups the rest (etp*ep apart). So
// experts' collectives ride NVLink whenever etp*ep ranks fit a node.
std::array<GroupSpan, kGroupKindCount> group_spans(const Strategy& s, const Cluster& cluster, int stage);
// Replicas of each expert shard: tp*cp*dp / (ep*etp) (the group expert gradients reduce over).
int expert_data_parallel_size(const Strategy& s);
// The experts the rank at `position` of an expert group holds, as Megatron places them: `experts_per_rank`
// consecutive ones from this.
constexpr int first_expert_of(int position, int experts_per_rank) { return position * experts_per_rank; }
// Megatron's load-balanced context parallelism: a sequence is cut into 2cp equal chunks, and the CP rank at
// `position` holds chunk `position`, then chunk 2cp-1-position (every rank then does the same causal work).
constexpr std::array<int, 2> context_chunks_of(int position, int context_parallel_size) {
  return {position, 2 * context_parallel_size - 1 - position};
}

}  // namespace twin
