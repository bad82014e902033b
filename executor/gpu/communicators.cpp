// Every split is a collective over the world: all ranks call split() in the same order, non-members with
// NCCL_SPLIT_NOCOLOR.
#include "executor/gpu/communicators.hpp"

#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "gpu/checks.hpp"

namespace twin::exec {

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

std::vector<std::pair<int, int>> p2p_stage_pairs(const IterationGraph& graph) {
  std::set<std::pair<int, int>> pairs;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).kind == OpKind::send && rc.op(i).group == GroupKind::pipeline)
        pairs.insert({rc.stage, rc.op(i).peer});
  return {pairs.begin(), pairs.end()};
}

Communicators::Communicators(const Strategy& s, const IterationGraph& graph, int rank, int world_size,
                             ncclUniqueId id) {
  if (world_size != s.world_size())
    throw std::invalid_argument(fmt::format("the plan needs {} GPUs, the launch has {}", s.world_size(), world_size));
  me_ = coordinates_of(s, rank);
  TWIN_NCCL_CHECK(ncclCommInitRank(&world_, world_size, id, rank));
  owned_.push_back(world_);
  const int TP = s.tensor_model_parallel_size, CP = s.context_parallel_size, DP = s.data_parallel_size;
  const int within_stage = me_.tp + TP * (me_.cp + CP * me_.dp);  // position among the stage's ranks
  // Tensor group: same (cp, dp, pp); data group: same (tp, pp), over cp and dp.
  const int tensor_color = me_.cp + CP * (me_.dp + DP * me_.pp);
  tensor_ = split(tensor_color, me_.tp);
  tensor_optimizer_ = split(tensor_color, me_.tp);
  data_ = split(me_.tp + TP * me_.pp, me_.cp + CP * me_.dp);
  pipeline_optimizer_ = split(within_stage, me_.pp);
  bool has_embedding_sync = false;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) has_embedding_sync |= rc.op(i).role == OpRole::embedding_grad_sync;
  if (has_embedding_sync) {
    const bool member = me_.pp == 0 || me_.pp == s.pipeline_model_parallel_size - 1;
    embedding_ = split(member ? within_stage : NCCL_SPLIT_NOCOLOR, me_.pp);
  }
  for (const auto& [from, to] : p2p_stage_pairs(graph)) {
    const bool member = me_.pp == from || me_.pp == to;
    ncclComm_t comm = split(member ? within_stage : NCCL_SPLIT_NOCOLOR, me_.pp == from ? 0 : 1);
    if (member) p2p_[{from, to}] = comm;
  }
}

ncclComm_t Communicators::split(int color, int key) {
  ncclComm_t comm = nullptr;
  TWIN_NCCL_CHECK(ncclCommSplit(world_, color, key, &comm, nullptr));
  if (comm) owned_.push_back(comm);
  return comm;
}

std::pair<ncclComm_t, int> Communicators::p2p(int from_stage, int to_stage) const {
  auto found = p2p_.find({from_stage, to_stage});
  if (found == p2p_.end())
    throw std::logic_error(fmt::format("no pipeline communicator from stage {} to stage {}", from_stage, to_stage));
  return {found->second, me_.pp == from_stage ? 1 : 0};
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
