// The switch planner. Each unit's two parts are cut into the minimal common slicing of the two layouts
// (lcm of their piece counts, so every slice lies inside one piece of each); a receiver that does not own a
// slice gets it from an owner chosen greedily, on its node first.
#include "strategies/hot_switch/hot_switch_resharding.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "strategies/rank_layout.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {

int stage_of_unit(const ModelConfig& model, const Strategy& s, const SwitchUnit& unit) {
  const int pp = s.pipeline_model_parallel_size;
  if (unit.layer < 0) return unit.output ? pp - 1 : 0;
  for (int stage = 0; stage < pp; ++stage) {
    const int first = first_layer_of(model, s, stage, 0);
    if (unit.layer >= first && unit.layer < first + layers_in_virtual_stage(model, s, stage)) return stage;
  }
  return pp - 1;
}

// One part's layout: `pieces` contiguous ranges; a rank owns piece piece_of(rank), or none (-1).
struct PartLayout {
  int pieces = 1;
  std::vector<int> piece_of;  // per global rank
};

// `gradient_target`: where accumulated gradients go (one rank of each reduction group, reduction_target's).
PartLayout part_layout(const ModelConfig& model, const Strategy& s, const SwitchUnit& unit, bool tp_split,
                       bool gradient, bool gradient_target = false) {
  const int tp = s.tensor_model_parallel_size, cp = s.context_parallel_size, dp = s.data_parallel_size;
  const bool sharded = gradient ? s.zero_stage >= 1 : s.zero_stage >= 3;
  const int data_group = sharded ? dp * cp : 1;
  const bool targets_only = gradient && gradient_target;
  PartLayout layout;
  layout.pieces = (tp_split ? tp : 1) * data_group;
  layout.piece_of.assign(static_cast<std::size_t>(s.world_size()), -1);
  const int stage = stage_of_unit(model, s, unit);
  for (int d = 0; d < dp; ++d)
    for (int c = 0; c < cp; ++c)
      for (int t = 0; t < tp; ++t) {
        const int member = sharded ? d * cp + c : 0;
        if (targets_only && !reduction_target(s, global_rank(s, t, c, d, stage))) continue;
        layout.piece_of[global_rank(s, t, c, d, stage)] = (tp_split ? t : 0) * data_group + member;
      }
  return layout;
}

std::int64_t range_begin(std::int64_t elements, int pieces, int piece) { return elements * piece / pieces; }


}  // namespace

std::vector<SwitchUnit> switch_units(const ModelConfig& model) {
  std::vector<SwitchUnit> units;
  const EmbeddingAndOutputParameters ends = embedding_and_output_parameters(model, model.vocab_size);
  units.push_back({"embedding", -1, false, ends.word_embedding, ends.position_embedding});
  for (int layer = 0; layer < model.num_layers; ++layer) {
    // Experts are not TP-split (hot switching searches expert_tensor_parallel_size 1 only): they move with the
    // replicated part.
    const LayerParameterGroups g = layer_parameter_groups(model, layer);
    units.push_back(
        {"layer " + std::to_string(layer), layer, false, g.tp_split(), g.replicated + g.experts * g.per_expert});
  }
  units.push_back({"output", -1, true, ends.output_projection, ends.final_norm});
  return units;
}

std::int64_t owned_elements(const ModelConfig& model, const Strategy& strategy, const SwitchUnit& unit, int rank,
                            bool gradient) {
  std::int64_t owned = 0;
  for (bool tp_split : {true, false}) {
    const std::int64_t elements = tp_split ? unit.tp_split_elements : unit.replicated_elements;
    const PartLayout layout = part_layout(model, strategy, unit, tp_split, gradient);
    const int piece = layout.piece_of[rank];
    if (piece >= 0) owned += range_begin(elements, layout.pieces, piece + 1) - range_begin(elements, layout.pieces, piece);
  }
  return owned;
}

Bytes SwitchPlan::max_received_bytes() const {
  return received_bytes.empty() ? 0 : *std::max_element(received_bytes.begin(), received_bytes.end());
}

SwitchPlan plan_switch(const ModelConfig& model, const Cluster& cluster, const Strategy& from, const Strategy& to,
                       bool with_gradients) {
  const int world = to.world_size();
  SwitchPlan plan;
  plan.sent_bytes.assign(world, 0);
  plan.received_bytes.assign(world, 0);
  SwitchSenders senders(cluster, world);
  const std::vector<SwitchUnit> units = switch_units(model);
  std::map<std::tuple<int, bool, int, int>, Bytes> merged;  // (unit, gradient, from, to) -> bytes
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    for (bool gradient : {false, true}) {
      if (gradient && !with_gradients) continue;
      const Bytes element_bytes = gradient ? kSwitchGradientBytes : kSwitchParamBytes;
      for (bool tp_split : {true, false}) {
        const std::int64_t elements = tp_split ? units[u].tp_split_elements : units[u].replicated_elements;
        if (elements == 0) continue;
        const PartLayout source = part_layout(model, from, units[u], tp_split, gradient);
        const PartLayout target = part_layout(model, to, units[u], tp_split, gradient, true);
        const int slices = std::lcm(source.pieces, target.pieces);
        std::vector<std::vector<int>> owners(source.pieces), needers(target.pieces);
        for (int rank = 0; rank < world; ++rank) {
          if (source.piece_of[rank] >= 0) owners[source.piece_of[rank]].push_back(rank);
          if (target.piece_of[rank] >= 0) needers[target.piece_of[rank]].push_back(rank);
        }
        for (int slice = 0; slice < slices; ++slice) {
          const Bytes bytes =
              (range_begin(elements, slices, slice + 1) - range_begin(elements, slices, slice)) * element_bytes;
          if (bytes == 0) continue;
          const std::vector<int>& have = owners[slice / (slices / source.pieces)];
          for (int receiver : needers[slice / (slices / target.pieces)]) {
            if (std::find(have.begin(), have.end(), receiver) != have.end()) continue;
            bool intra = false;
            const int sender = senders.choose(have, receiver, bytes, intra);
            (intra ? plan.intra_node_bytes : plan.inter_node_bytes) += bytes;
            plan.sent_bytes[sender] += bytes;
            plan.received_bytes[receiver] += bytes;
            merged[{u, gradient, sender, receiver}] += bytes;
          }
        }
      }
    }
  }
  for (const auto& [key, bytes] : merged) {
    const auto [unit, gradient, sender, receiver] = key;
    plan.transfers.push_back({unit, gradient, sender, receiver, bytes});
  }
  return plan;
}

}  // namespace twin
