// Rank placement in Megatron-LM's order and the span of each communicator over the cluster's nodes.
// GroupKind::data is Megatron's data-parallel group *with context parallel* (dp*cp ranks): dense
// gradients are reduced over it, since CP ranks hold the same weights and see different tokens.
// Experts are not TP-sharded (expert_tensor_parallel_size 1), so Megatron's expert grid is
// tp-ep-dp-pp with etp 1: EP groups are the innermost (consecutive) ranks of a stage's tp*cp*dp
// ranks, and expert_data = tp*cp*dp / ep replicas hold the same experts.
#include "strategies/rank_layout.hpp"

#include <algorithm>
#include <vector>

namespace twin {
namespace {

GroupSpan span_of(const std::vector<int>& members, const Cluster& cluster) {
  GroupSpan span;
  span.size = static_cast<int>(members.size());
  std::vector<int> nodes;
  nodes.reserve(members.size());
  for (int rank : members) nodes.push_back(cluster.node_of_rank(rank));
  const int home = nodes.front();
  span.ranks_per_node = static_cast<int>(std::count(nodes.begin(), nodes.end(), home));
  std::sort(nodes.begin(), nodes.end());
  span.nodes = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  return span;
}

}  // namespace

int global_rank(const Strategy& s, int tp, int cp, int dp, int pp) {
  return tp + s.tensor_model_parallel_size *
                  (cp + s.context_parallel_size * (dp + s.data_parallel_size * pp));
}

std::array<GroupSpan, kGroupKindCount> group_spans(const Strategy& s, const Cluster& cluster, int stage) {
  const int tp = s.tensor_model_parallel_size, cp = s.context_parallel_size, dp = s.data_parallel_size;
  const int pp = s.pipeline_model_parallel_size, ep = s.expert_model_parallel_size;
  std::array<GroupSpan, kGroupKindCount> spans{};
  auto set = [&](GroupKind kind, const std::vector<int>& members) {
    spans[static_cast<int>(kind)] = span_of(members, cluster);
  };
  std::vector<int> members;
  members.reserve(static_cast<std::size_t>(std::max({tp, cp * dp, pp, tp * cp * dp})));

  set(GroupKind::none, {global_rank(s, 0, 0, 0, stage)});
  members.clear();
  for (int t = 0; t < tp; ++t) members.push_back(global_rank(s, t, 0, 0, stage));
  set(GroupKind::tensor, members);
  members.clear();
  for (int c = 0; c < cp; ++c) members.push_back(global_rank(s, 0, c, 0, stage));
  set(GroupKind::context, members);
  members.clear();
  for (int d = 0; d < dp; ++d)
    for (int c = 0; c < cp; ++c) members.push_back(global_rank(s, 0, c, d, stage));
  set(GroupKind::data, members);
  members.clear();
  for (int p = 0; p < pp; ++p) members.push_back(global_rank(s, 0, 0, 0, p));
  set(GroupKind::pipeline, members);
  if (pp > 1) set(GroupKind::embedding, {global_rank(s, 0, 0, 0, 0), global_rank(s, 0, 0, 0, pp - 1)});

  // The stage's ranks are consecutive: first_rank + i for i in [0, tp*cp*dp).
  const int first = global_rank(s, 0, 0, 0, stage);
  const int stage_ranks = tp * cp * dp;
  members.clear();
  for (int i = 0; i < std::min(ep, stage_ranks); ++i) members.push_back(first + i);
  set(GroupKind::expert, members);
  members.clear();
  for (int i = 0; i < stage_ranks; i += std::max(ep, 1)) members.push_back(first + i);
  set(GroupKind::expert_data, members);
  return spans;
}

int expert_data_parallel_size(const Strategy& s) {
  return s.tensor_model_parallel_size * s.context_parallel_size * s.data_parallel_size /
         s.expert_model_parallel_size;
}

}  // namespace twin
