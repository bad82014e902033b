// The parameter layout's plain queries (executor/parameters.hpp): a unit's tensor by role, the QKV columns a TP rank
// holds, a rank's placement in its groups, whether a stage holds the embedding, what of a unit the gradient norm counts
// and what no tensor covers. The layout itself, the units and their tensors, is executor/parameters.cpp.
#include "executor/parameters.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "strategies/rank_layout.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {

const WeightTensor& ParameterUnitLayout::tensor(OpRole role) const {
  if (const WeightTensor* t = find(role, WeightPart::weight)) return *t;
  throw std::logic_error(fmt::format("parameter unit {} has no {} weight", id, to_string(role)));
}

const WeightTensor* ParameterUnitLayout::find(OpRole role, WeightPart part) const {
  for (const WeightTensor& t : tensors)
    if (t.role == role && t.part == part) return &t;
  return nullptr;
}

std::array<ColumnBlock, 3> qkv_column_blocks(std::int64_t heads_local, std::int64_t groups_local, std::int64_t d,
                                             int tp, int rank) {
  const std::int64_t heads = heads_local * tp, groups = groups_local * tp;
  return {{{rank * heads_local * d, heads_local * d},
           {heads * d + rank * groups_local * d, groups_local * d},
           {(heads + groups) * d + rank * groups_local * d, groups_local * d}}};
}

RankPlacement placement_of(const Strategy& strategy, int rank) {
  const RankCoordinates c = coordinates_of(strategy, rank);
  RankPlacement placement{c.tp, group_slot(strategy, GroupKind::data, rank)->position, c.pp};
  placement.ep_rank = group_slot(strategy, GroupKind::expert, rank)->position;
  placement.expert_data_rank = group_slot(strategy, GroupKind::expert_data, rank)->position;
  return placement;
}

std::vector<ElementRange> gradient_norm_ranges(const ParameterUnitLayout& unit, bool count_replicated) {
  const std::int64_t part_begin = unit.shard_begin, part_end = unit.shard_begin + unit.shard_elements;
  std::vector<ElementRange> ranges;
  const auto add = [&](std::int64_t begin, std::int64_t end) {  // [begin, end) clipped to this rank's part
    begin = std::max(begin, part_begin);
    end = std::min(end, part_end);
    if (end > begin) ranges.push_back({begin, end - begin});
  };
  std::vector<const WeightTensor*> left_out;
  for (const WeightTensor& w : unit.tensors)
    if ((w.tp_replicated && !count_replicated) || w.embedding_copy) left_out.push_back(&w);
  std::sort(left_out.begin(), left_out.end(),
            [](const WeightTensor* a, const WeightTensor* b) { return a->offset < b->offset; });
  std::int64_t from = 0;
  for (const WeightTensor* w : left_out) {
    add(from, w->offset);
    from = w->offset + w->elements();
  }
  add(from, unit.padded);
  return ranges;
}

bool stage_holds_embedding(const Strategy& strategy, int stage) {
  for (int chunk = 0; chunk < chunks_per_stage(strategy); ++chunk)
    if (virtual_stage_of(strategy, stage, chunk) == 0) return true;
  return false;
}

std::vector<ElementRange> uncovered_ranges(const ParameterUnitLayout& unit) {
  std::vector<ElementRange> covered;
  for (const WeightTensor& w : unit.tensors) covered.push_back({w.offset, w.elements()});
  std::sort(covered.begin(), covered.end(),
            [](const ElementRange& a, const ElementRange& b) { return a.begin < b.begin; });
  std::vector<ElementRange> gaps;
  std::int64_t at = 0;
  for (const ElementRange& c : covered) {
    if (c.begin > at) gaps.push_back({at, c.begin - at});
    at = std::max(at, c.begin + c.count);
  }
  if (unit.padded > at) gaps.push_back({at, unit.padded - at});
  return gaps;
}

}  // namespace twin::exec
