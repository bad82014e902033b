#include "strategies/layout_switch.hpp"

#include "strategies/rank_layout.hpp"

namespace twin {

bool reduction_target(const Strategy& strategy, int rank) {
  const RankCoordinates at = coordinates_of(strategy, rank);
  return strategy.zero_stage >= 1 || (at.dp == 0 && at.cp == 0);
}

SwitchSenders::SwitchSenders(const Cluster& cluster, int world) : cluster_(cluster), intra_(world, 0), inter_(world, 0) {}

int SwitchSenders::choose(const std::vector<int>& owners, int receiver, Bytes bytes, bool& intra) {
  int best = -1;
  for (int owner : owners)
    if (cluster_.node_of_rank(owner) == cluster_.node_of_rank(receiver) && (best < 0 || intra_[owner] < intra_[best]))
      best = owner;
  intra = best >= 0;
  if (intra) {
    intra_[best] += bytes;
    return best;
  }
  for (int owner : owners)
    if (best < 0 || inter_[owner] < inter_[best]) best = owner;
  inter_[best] += bytes;
  return best;
}

bool same_parameter_layout(const Strategy& a, const Strategy& b) {
  return a.tensor_model_parallel_size == b.tensor_model_parallel_size &&
         a.pipeline_model_parallel_size == b.pipeline_model_parallel_size &&
         a.context_parallel_size == b.context_parallel_size &&
         a.expert_model_parallel_size == b.expert_model_parallel_size &&
         a.expert_tensor_parallel_size == b.expert_tensor_parallel_size &&
         a.data_parallel_size == b.data_parallel_size &&
         a.virtual_pipeline_model_parallel_size == b.virtual_pipeline_model_parallel_size &&
         a.zero_stage == b.zero_stage &&
         (a.schedule == Schedule::double_strand) == (b.schedule == Schedule::double_strand);
}

}  // namespace twin
