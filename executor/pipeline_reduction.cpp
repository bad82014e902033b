// Pieces are the cells of a grid: every holder's rectangle edges cut the weight's rows and columns, so that each
// cell lies whole inside one rectangle of every GPU that holds any of it.
#include "executor/pipeline_reduction.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "executor/parameters.hpp"
#include "executor/weight_rects.hpp"
#include "strategies/families/rank_plan.hpp"

namespace twin::exec {
namespace {

struct Holder {
  int rank = 0, pipeline = 0;
  bool partial = false;  // its gradient of a TP-replicated element is a partial sum (SP; QK-norm's at any TP)
  std::vector<Rect> rects;
  // A pipeline of a larger TP size holds more vocabulary padding than another: that exists, and is reduced, on
  // the pipelines that hold it only.
  VocabularyPadding padding;
};

// The rectangle of `holder` that contains the cell at (row, col), if any.
const Rect* containing(const Holder& holder, std::int64_t row, std::int64_t col) {
  for (const Rect& r : holder.rects)
    if (row >= r.row && row < r.row + r.rows && col >= r.col && col < r.col + r.cols) return &r;
  return nullptr;
}

// Adds the pieces of one weight, held by `holders` (every pipeline's), to `by_ranks`' reductions.
void cut_weight(const std::string& name, std::int32_t unit, const std::vector<Holder>& holders, int pipelines,
                int segment, std::map<std::vector<int>, PipelineReduction>& by_ranks,
                std::vector<std::vector<int>>& order) {
  std::set<std::int64_t> row_cuts, col_cuts;
  for (const Holder& h : holders)
    for (const Rect& r : h.rects) {
      row_cuts.insert({r.row, r.row + r.rows});
      col_cuts.insert({r.col, r.col + r.cols});
    }
  for (auto row = row_cuts.begin(); std::next(row) != row_cuts.end(); ++row)
    for (auto col = col_cuts.begin(); std::next(col) != col_cuts.end(); ++col) {
      std::vector<std::pair<const Holder*, const Rect*>> held;
      std::set<int> pipelines_holding;
      for (const Holder& h : holders)
        if (const Rect* r = containing(h, *row, *col)) {
          held.push_back({&h, r});
          pipelines_holding.insert(h.pipeline);
        }
      if (held.empty()) continue;  // between two column runs of a fused weight
      if (static_cast<int>(pipelines_holding.size()) != pipelines && !held.front().first->padding.contains(*row, *col))
        throw std::invalid_argument(fmt::format("{}: element ({}, {}) is held by {} of the {} pipelines", name, *row,
                                                *col, pipelines_holding.size(), pipelines));
      std::vector<int> ranks;
      for (const auto& [h, r] : held) ranks.push_back(h->rank);  // holders are in rank order
      auto [at, fresh] = by_ranks.try_emplace(ranks);
      PipelineReduction& reduction = at->second;
      if (fresh) {
        order.push_back(ranks);
        reduction.segment = segment;
        reduction.ranks = ranks;
        reduction.pieces.resize(ranks.size());
        for (const auto& [h, r] : held) {
          const auto same_pipeline = std::count_if(held.begin(), held.end(),
                                                   [&](const auto& other) { return other.first->pipeline == h->pipeline; });
          reduction.scale.push_back(h->partial ? 1.0 : 1.0 / static_cast<double>(same_pipeline));
        }
      }
      const std::int64_t rows = *std::next(row) - *row, cols = *std::next(col) - *col;
      for (std::size_t i = 0; i < held.size(); ++i)
        reduction.pieces[i].push_back({unit, rows, cols, element_of(*held[i].second, *row, *col), held[i].second->ld});
      reduction.elements += rows * cols;
    }
}

}  // namespace

std::vector<PipelineReduction> plan_pipeline_reduction(const PlanGraphs& lowered) {
  const std::optional<ReplicaReduction> replicas = replica_reduction(lowered);
  if (!replicas) return {};
  // Every GPU's units, as its part lays them out.
  std::map<int, std::vector<ParameterUnitLayout>> units_of;
  std::map<int, bool> sequence_parallel;
  for (int rank = 0; rank < lowered.world_size(); ++rank) {
    const PlanPart part = rank_parts(lowered, rank).front();
    units_of[rank] = plan_parameter_units(part, rank, 0);
    sequence_parallel[rank] = part.strategy.sequence_parallel;
  }
  std::vector<PipelineReduction> out;
  for (int g = 0; g < static_cast<int>(replicas->segments.size()); ++g) {
    const ReplicaSegment& segment = replicas->segments[g];
    const int pipelines = static_cast<int>(segment.holders.size());
    // Per (unit, weight name) in the segment, in the unit's order: every pipeline's holders.
    std::map<std::int32_t, std::vector<std::string>> names;
    std::map<std::pair<std::int32_t, std::string>, std::vector<Holder>> holders;
    for (int p = 0; p < pipelines; ++p)
      for (int rank : segment.holders[p])
        for (const ParameterUnitLayout& unit : units_of.at(rank)) {
          if (std::find(segment.units.begin(), segment.units.end(), unit.id) == segment.units.end()) continue;
          for (const WeightTensor& w : unit.tensors) {
            if (w.embedding_copy)
              throw std::invalid_argument("an asymmetric plan whose output layer holds a copy of a tied embedding table");
            std::vector<std::string>& listed = names[unit.id];
            if (std::find(listed.begin(), listed.end(), w.name) == listed.end()) listed.push_back(w.name);
            // A partial gradient (under SP, or QK-norm's at any TP) is summed; a replicated whole one averaged.
            Holder holder{rank, p, sequence_parallel.at(rank) || w.tp_partial_gradient, rects_of(w, 0, unit.padded),
                          vocabulary_padding(w, lowered.scenario.model.vocab_size)};
            holders[{unit.id, w.name}].push_back(std::move(holder));
          }
        }
    std::map<std::vector<int>, PipelineReduction> by_ranks;
    std::vector<std::vector<int>> order;
    for (const auto& [unit, unit_names] : names)
      for (const std::string& name : unit_names) {
        std::vector<Holder>& held = holders.at({unit, name});
        std::sort(held.begin(), held.end(), [](const Holder& a, const Holder& b) { return a.rank < b.rank; });
        cut_weight(name, unit, held, pipelines, g, by_ranks, order);
      }
    for (const std::vector<int>& ranks : order) out.push_back(std::move(by_ranks.at(ranks)));
  }
  return out;
}

std::vector<std::vector<std::vector<int>>> reduction_group_rounds(const std::vector<PipelineReduction>& reductions) {
  std::vector<std::vector<int>> sets;
  for (const PipelineReduction& r : reductions)
    if (std::find(sets.begin(), sets.end(), r.ranks) == sets.end()) sets.push_back(r.ranks);
  std::vector<std::vector<std::vector<int>>> rounds;
  std::vector<std::set<int>> used;
  for (const std::vector<int>& set : sets) {
    std::size_t round = 0;
    while (round < rounds.size() &&
           std::any_of(set.begin(), set.end(), [&](int rank) { return used[round].count(rank) > 0; }))
      ++round;
    if (round == rounds.size()) {
      rounds.emplace_back();
      used.emplace_back();
    }
    rounds[round].push_back(set);
    used[round].insert(set.begin(), set.end());
  }
  return rounds;
}

}  // namespace twin::exec
