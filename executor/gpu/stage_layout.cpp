// A stage's units and chunks from its plan part: per-layer plans lay each unit out as its UnitExecution says,
// virtual stages and per-layer splits give the chunks their layers.
#include "executor/gpu/stage_layout.hpp"

#include <algorithm>
#include <stdexcept>

#include "executor/weight_residency.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {

StageLayout::StageLayout(const PlanPart& plan_part, int rank, Communicators& comms)
    : plan_part_(plan_part), me_(coordinates_of(plan_part.strategy, plan_part.layout_rank(rank))) {
  const auto layout_under = [&](const Strategy& weights, const lowering::RankShapes& shapes, int group, bool ulysses) {
    const Communicators::Layout& moves = comms.layout(group);
    return UnitLayout{shapes, coordinates_of(weights, plan_part_.layout_rank(rank)).tp, ulysses, moves.tensor,
                      moves.tensor_optimizer, comms.layout(weights.tensor_model_parallel_size).data};
  };
  const Strategy& strategy = plan_part.strategy;
  const ModelConfig& model = plan_part.scenario.model;
  home_ = layout_under(strategy, lowering::rank_shapes(plan_part.scenario, strategy),
                       strategy.tensor_model_parallel_size, false);
  if (plan_part_.per_layer()) {
    std::vector<int> units = {kEmbeddingUnit, kHeadUnit};
    for (int layer = 0; layer < model.num_layers; ++layer) units.push_back(layer);
    for (int unit : units) {
      const UnitExecution& execution = *plan_part_.unit_execution(unit);
      unit_layouts_.emplace(unit, layout_under(execution.weights, execution.shapes, execution.group,
                                               execution.ulysses));
    }
  }
  const int chunks = chunks_per_stage(strategy);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int first = first_layer_of(model, strategy, me_.pp, chunk);
    chunk_layers_[chunk] = {first, first + layers_in_virtual_stage(model, strategy,
                                                                   virtual_stage_of(strategy, me_.pp, chunk))};
  }
  if (!plan_part_.stage_layers.empty())  // a per-layer plan's split (no virtual stages)
    chunk_layers_[0] = {plan_part_.first_layer(me_.pp), plan_part_.first_layer(me_.pp + 1)};
}

const UnitLayout& StageLayout::layout(int unit) const {
  const auto found = unit_layouts_.find(unit);
  return found == unit_layouts_.end() ? home_ : found->second;
}

std::int64_t StageLayout::most_tokens() const {
  std::int64_t tokens = home_.shapes.tokens;
  for (const auto& [unit, layout] : unit_layouts_) tokens = std::max(tokens, layout.shapes.tokens);
  return tokens;
}

int StageLayout::unit_of(const Op& op, const OpBinding& b) { return op_unit(op, b); }

int StageLayout::previous_unit(int unit, int chunk) const {
  const auto [first, end] = chunk_layers_.at(chunk);
  if (unit == kHeadUnit) return end - 1;
  if (unit > first) return unit - 1;
  const int virtual_stage = virtual_stage_of(strategy(), me_.pp, chunk);
  if (virtual_stage == 0) return kEmbeddingUnit;
  // The virtual stage before it on this stage (double strand's fold turns on the last stage: its mirror chunk
  // follows its first) hands its last layer's output over in memory; otherwise it arrives by p2p.
  for (const auto& [other, layers] : chunk_layers_)
    if (virtual_stage_of(strategy(), me_.pp, other) == virtual_stage - 1) return layers.second - 1;
  return kReceivedUnit - chunk;
}

std::vector<EqualSequences> StageLayout::sequence_runs(int mb, const lowering::RankShapes& shapes) const {
  const std::int64_t rows = shapes.b, length = shapes.s;
  if (plan_part_.packs.empty()) return {{0, rows, length}};
  std::vector<EqualSequences> runs;
  const std::int64_t first_row =
      static_cast<std::int64_t>(me_.dp) * strategy().num_micro_batches * rows + static_cast<std::int64_t>(mb) * rows;
  for (std::int64_t row = 0; row < rows; ++row) {
    std::vector<std::int64_t> lengths = plan_part_.packs.at(static_cast<std::size_t>(first_row + row));
    std::int64_t used = 0;
    for (std::int64_t l : lengths) used += l;
    if (used > length) throw std::logic_error("executor: a pack longer than its row");
    if (used < length) lengths.push_back(length - used);  // the unfilled end: one more sequence
    std::int64_t token = row * length;
    for (std::int64_t l : lengths) {
      if (!runs.empty() && runs.back().length == l && runs.back().first_token + runs.back().sequences * l == token)
        ++runs.back().sequences;
      else
        runs.push_back({token, 1, l});
      token += l;
    }
  }
  return runs;
}

Act StageLayout::arriving_output_gradient() const {
  return shapes().residual_fusion ? Act{layer::Tensor::output, Form::gradient}
                                  : Act{layer::Tensor::output, Form::next_norm_gradient};
}

}  // namespace twin::exec
