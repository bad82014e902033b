// Rank placement in Megatron-LM's order and the span of each communicator over the cluster's nodes.
// GroupKind::data is Megatron's data-parallel group *with context parallel* (dp*cp ranks): dense
// gradients are reduced over it, since CP ranks hold the same weights and see different tokens.
// Experts live on Megatron's expert grid (megatron/core/parallel_state.py, initialize_model_parallel's
// expert_decoder_rank_generator at NVIDIA/Megatron-LM d98e8a64dd): the same world folded as etp-ep-edp-pp, in
// the order tp-cp-ep-dp-pp with cp 1 ("MoE parallel folding"). Within a stage's tp*cp*dp consecutive ranks,
// expert-TP groups are etp consecutive ranks, EP groups ep ranks etp apart, and expert_data groups the
// tp*cp*dp / (etp*ep) ranks etp*ep apart.
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
  // "Nodes" of a span are NVLink domains: ranks of one domain (a node, or a rack's NVLink switch system) share the
  // intra-node link.
  for (int rank : members) nodes.push_back(cluster.nvlink_domain_of_rank(rank));
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

RankCoordinates coordinates_of(const Strategy& s, int rank) {
  RankCoordinates c;
  c.tp = rank % s.tensor_model_parallel_size;
  rank /= s.tensor_model_parallel_size;
  c.cp = rank % s.context_parallel_size;
  rank /= s.context_parallel_size;
  c.dp = rank % s.data_parallel_size;
  c.pp = rank / s.data_parallel_size;
  return c;
}

namespace {

// A group of one kind is the ranks that differ from a member only along the kind's axes of the global rank
// (digit (rank / stride) % size along each); the first axis varies fastest within the group.
struct Axis {
  int size = 1, stride = 1;
};
struct GroupAxes {
  std::array<Axis, 2> axes{};
  int count = 0;
};

GroupAxes axes_of(const Strategy& s, GroupKind kind) {
  const int tp = s.tensor_model_parallel_size, cp = s.context_parallel_size, dp = s.data_parallel_size;
  const int pp = s.pipeline_model_parallel_size, ep = std::max(s.expert_model_parallel_size, 1);
  const int etp = std::max(s.expert_tensor_parallel_size, 1);
  const int stage_ranks = tp * cp * dp;  // a stage's ranks are consecutive
  switch (kind) {
    case GroupKind::none: return {};
    case GroupKind::tensor: return {{{{tp, 1}}}, 1};
    case GroupKind::context: return {{{{cp, tp}}}, 1};
    case GroupKind::data: return {{{{cp, tp}, {dp, tp * cp}}}, 2};
    case GroupKind::pipeline: return {{{{pp, stage_ranks}}}, 1};
    case GroupKind::embedding: return {{{{pp > 1 ? 2 : 1, std::max(pp - 1, 1) * stage_ranks}}}, 1};
    // Megatron's expert grid etp-ep-edp-pp over a stage's ranks (validity refuses etp*ep not dividing them).
    case GroupKind::expert_tensor: return {{{{std::min(etp, stage_ranks), 1}}}, 1};
    case GroupKind::expert: return {{{{std::min(ep, std::max(stage_ranks / etp, 1)), etp}}}, 1};
    case GroupKind::expert_data: return {{{{(stage_ranks + etp * ep - 1) / (etp * ep), etp * ep}}}, 1};
    case GroupKind::amax: return {{{{stage_ranks, 1}}}, 1};  // tensor, context and data: the stage's ranks
  }
  return {};
}

}  // namespace

std::optional<GroupSlot> group_slot(const Strategy& s, GroupKind kind, int rank) {
  if (kind == GroupKind::embedding) {
    const int stage = coordinates_of(s, rank).pp;
    if (stage != 0 && stage != s.pipeline_model_parallel_size - 1) return std::nullopt;
  }
  const GroupAxes group = axes_of(s, kind);
  GroupSlot slot{rank, 0};
  int place_value = 1;
  for (int i = 0; i < group.count; ++i) {
    const Axis& axis = group.axes[i];
    const int digit = rank / axis.stride % axis.size;
    slot.first_rank -= digit * axis.stride;
    slot.position += digit * place_value;
    place_value *= axis.size;
  }
  return slot;
}

std::vector<int> group_members(const Strategy& s, GroupKind kind, int rank) {
  const std::optional<GroupSlot> slot = group_slot(s, kind, rank);
  if (!slot) return {};
  const GroupAxes group = axes_of(s, kind);
  std::vector<int> members{slot->first_rank};
  for (int i = 0; i < group.count; ++i) {
    const Axis& axis = group.axes[i];
    const std::size_t inner = members.size();
    for (int digit = 1; digit < axis.size; ++digit)
      for (std::size_t m = 0; m < inner; ++m) members.push_back(members[m] + digit * axis.stride);
  }
  return members;
}

std::array<GroupSpan, kGroupKindCount> group_spans(const Strategy& s, const Cluster& cluster, int stage) {
  std::array<GroupSpan, kGroupKindCount> spans{};
  const int first = global_rank(s, 0, 0, 0, stage);
  for (GroupKind kind : {GroupKind::none, GroupKind::tensor, GroupKind::context, GroupKind::data,
                         GroupKind::pipeline, GroupKind::expert, GroupKind::expert_data, GroupKind::expert_tensor,
                         GroupKind::amax})
    spans[static_cast<int>(kind)] = span_of(group_members(s, kind, first), cluster);
  // Every stage's ops name the embedding group by the first stage's (a middle stage has no embedding op).
  if (s.pipeline_model_parallel_size > 1)
    spans[static_cast<int>(GroupKind::embedding)] = span_of(group_members(s, GroupKind::embedding, 0), cluster);
  return spans;
}

int expert_data_parallel_size(const Strategy& s) {
  return s.tensor_model_parallel_size * s.context_parallel_size * s.data_parallel_size /
         (s.expert_model_parallel_size * s.expert_tensor_parallel_size);
}

}  // namespace twin
