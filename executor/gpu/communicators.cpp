// Every split is a collective over the world: all ranks call split() in the same order, non-members with
// NCCL_SPLIT_NOCOLOR.
#include "executor/gpu/communicators.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"

namespace twin::exec {

std::vector<std::pair<int, int>> p2p_stage_pairs(const IterationGraph& graph) {
  std::set<std::pair<int, int>> pairs;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).kind == OpKind::send && rc.op(i).group == GroupKind::pipeline)
        pairs.insert({rc.stage, graph.classes.at(static_cast<std::size_t>(rc.op(i).peer)).stage});
  return {pairs.begin(), pairs.end()};
}

Communicators::Communicators(const Strategy& s, const IterationGraph& graph, int rank, int world_size,
                             ncclUniqueId id, const std::vector<Strategy>& layouts) {
  if (world_size != s.world_size())
    throw std::invalid_argument(fmt::format("the plan needs {} GPUs, the launch has {}", s.world_size(), world_size));
  TWIN_NCCL_CHECK(ncclCommInitRank(&world_, world_size, id, rank));
  owned_.push_back(world_);
  make_groups(s, graph, rank, layouts);
}

Communicators::Communicators(const Strategy& s, const IterationGraph& graph, int rank, int world_size,
                             const Communicators& parent) {
  if (world_size != s.world_size())
    throw std::invalid_argument(fmt::format("the plan needs {} GPUs, the launch has {}", s.world_size(), world_size));
  TWIN_NCCL_CHECK(ncclCommSplit(parent.world_, 0, rank, &world_, nullptr));
  owned_.push_back(world_);
  make_groups(s, graph, rank, {});
}

Communicators::Communicators(const ExplicitGroups& groups, int rank, int world_size, ncclUniqueId id) {
  if (world_size != static_cast<int>(groups.stage_of_rank.size()))
    throw std::invalid_argument(fmt::format("the plan needs {} GPUs, the launch has {}", groups.stage_of_rank.size(),
                                            world_size));
  TWIN_NCCL_CHECK(ncclCommInitRank(&world_, world_size, id, rank));
  owned_.push_back(world_);
  me_rank_ = rank;
  me_.pp = groups.stage_of_rank.at(static_cast<std::size_t>(rank));
  norm_over_whole_pipeline_ = true;
  tensor_ = split_groups(groups.tensor);
  tensor_optimizer_ = split_groups(groups.tensor);
  int tensor_size = 0;
  TWIN_NCCL_CHECK(ncclCommCount(tensor_, &tensor_size));
  layouts_[tensor_size] = {tensor_, tensor_optimizer_, nullptr};
  pipeline_optimizer_ = split_groups(groups.pipeline);
  for (const ExplicitGroups::Boundary& b : groups.boundaries) {
    ncclComm_t comm = split_groups(b.groups);
    for (std::size_t g = 0; g < b.groups.size(); ++g) {
      const auto at = std::find(b.groups[g].begin(), b.groups[g].end(), rank);
      if (at != b.groups[g].end())
        p2p_[{b.from_stage, b.to_stage}] = {comm, b.sides[g], static_cast<int>(at - b.groups[g].begin()), true};
    }
  }
  for (const auto& round : groups.reduction_rounds) {
    ncclComm_t comm = split_groups(round);
    for (const std::vector<int>& set : round)
      if (std::find(set.begin(), set.end(), rank) != set.end()) reductions_[set] = comm;
  }
}

ncclComm_t Communicators::split_groups(const std::vector<std::vector<int>>& groups) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto at = std::find(groups[g].begin(), groups[g].end(), me_rank_);
    if (at != groups[g].end()) return split(static_cast<int>(g), static_cast<int>(at - groups[g].begin()));
  }
  return split(NCCL_SPLIT_NOCOLOR, 0);
}

ncclComm_t Communicators::reduction(const std::vector<int>& ranks) const {
  const auto found = reductions_.find(ranks);
  if (found == reductions_.end()) throw std::logic_error("no communicator for a reduction across pipelines");
  return found->second;
}

void Communicators::make_resharding() {
  if (!resharding_) resharding_ = split(0, me_rank_);
}

void Communicators::make_groups(const Strategy& s, const IterationGraph& graph, int rank,
                                const std::vector<Strategy>& layouts) {
  me_ = coordinates_of(s, rank);
  me_rank_ = rank;
  // Color: the group's first rank; key: the rank's place in it (strategies/rank_layout.hpp).
  const auto split_in = [&](const Strategy& layout, GroupKind kind) {
    const std::optional<GroupSlot> slot = group_slot(layout, kind, rank);
    return slot ? split(slot->first_rank, slot->position) : split(NCCL_SPLIT_NOCOLOR, 0);
  };
  const auto split_by = [&](GroupKind kind) { return split_in(s, kind); };
  tensor_ = split_by(GroupKind::tensor);
  tensor_optimizer_ = split_by(GroupKind::tensor);
  data_ = split_by(GroupKind::data);
  layouts_[s.tensor_model_parallel_size] = {tensor_, tensor_optimizer_, data_};
  for (const Strategy& layout : layouts) {
    if (layouts_.count(layout.tensor_model_parallel_size))
      throw std::logic_error(fmt::format("two layouts of tensor-parallel size {}", layout.tensor_model_parallel_size));
    Layout& made = layouts_[layout.tensor_model_parallel_size];
    made.tensor = split_in(layout, GroupKind::tensor);
    made.tensor_optimizer = split_in(layout, GroupKind::tensor);
    made.data = split_in(layout, GroupKind::data);
  }
  pipeline_optimizer_ = split_by(GroupKind::pipeline);
  // Every rank sees the whole graph, so every rank makes the same splits in the same order.
  bool has_embedding_sync = false, has_expert = false, has_expert_data = false, has_context = false, has_amax = false;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      has_embedding_sync |= rc.op(i).role == OpRole::embedding_grad_sync;
      has_expert |= rc.op(i).is_communication() && rc.op(i).group == GroupKind::expert;
      has_expert_data |= rc.op(i).is_communication() && rc.op(i).group == GroupKind::expert_data;
      has_context |= rc.op(i).is_communication() && rc.op(i).group == GroupKind::context;
      has_amax |= rc.op(i).is_communication() && rc.op(i).group == GroupKind::amax;
    }
  if (has_embedding_sync) embedding_ = split_by(GroupKind::embedding);
  if (has_expert) expert_ = split_by(GroupKind::expert);
  if (has_expert_data) expert_data_ = split_by(GroupKind::expert_data);
  if (has_context) context_ = split_by(GroupKind::context);
  if (has_amax) amax_ = split_by(GroupKind::amax);
  // A pair's two ranks are members of one pipeline group: color it by that group.
  const int pipeline_group = group_slot(s, GroupKind::pipeline, rank)->first_rank;
  for (const auto& [from, to] : p2p_stage_pairs(graph)) {
    const bool member = me_.pp == from || me_.pp == to;
    ncclComm_t comm = split(member ? pipeline_group : NCCL_SPLIT_NOCOLOR, me_.pp == from ? 0 : 1);
    if (member) p2p_[{from, to}] = {comm, BoundarySides{}, me_.pp == from ? 0 : 1};
  }
}

ncclComm_t Communicators::split(int color, int key) {
  ncclComm_t comm = nullptr;
  TWIN_NCCL_CHECK(ncclCommSplit(world_, color, key, &comm, nullptr));
  if (comm) owned_.push_back(comm);
  return comm;
}

const Communicators::Layout& Communicators::layout(int tensor_size) const {
  const auto found = layouts_.find(tensor_size);
  if (found == layouts_.end())
    throw std::logic_error(fmt::format("no communicators for a layout of tensor-parallel size {}", tensor_size));
  return found->second;
}

const Communicators::Boundary& Communicators::boundary(int from_stage, int to_stage) const {
  auto found = p2p_.find({from_stage, to_stage});
  if (found == p2p_.end())
    throw std::logic_error(fmt::format("no pipeline communicator from stage {} to stage {}", from_stage, to_stage));
  return found->second;
}

std::string Communicators::async_error() const {
  for (ncclComm_t comm : owned_) {
    ncclResult_t result = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &result) != ncclSuccess) return "ncclCommGetAsyncError failed";
    if (result != ncclSuccess && result != ncclInProgress)
      return std::string(ncclGetErrorString(result)) + " (" + ncclGetLastError(comm) + ")";
  }
  return {};
}

void Communicators::abort_all() {
  for (ncclComm_t comm : owned_) ncclCommAbort(comm);
  owned_.clear();
}

Communicators::~Communicators() {
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) ncclCommDestroy(*it);
}

}  // namespace twin::exec
