// Each GPU's holding of a weight is cut into rectangles of the full weight (executor/weight_rects.hpp). The GPUs
// holding the same rectangles (data-parallel replicas) form
// one owner group; a receiver's need is intersected with each group's rectangles.
#include "executor/resharding.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "executor/parameters.hpp"
#include "executor/weight_rects.hpp"
#include "strategies/layout_switch.hpp"

namespace twin::exec {
namespace {

// The part of a unit's buffer a GPU holds valid (`needs`: the part it must hold after the switch): weights whole
// unless ZeRO-3 shards them; gradients after the reduction whole under ZeRO-0, the shard under ZeRO >= 1, and
// needed as gradient_start_range says.
std::pair<std::int64_t, std::int64_t> valid_range(const ParameterUnitLayout& unit, const Strategy& s, bool gradient,
                                                  bool needs) {
  if (gradient && needs) return gradient_start_range(unit);
  if (unit.sharded_optimizer && (gradient || s.zero_stage >= 3))
    return {unit.shard_begin, unit.shard_begin + unit.shard_elements};
  return {0, unit.padded};
}

struct Holding {
  int rank = 0;
  std::int64_t unit_elements = 0;
  std::vector<Rect> rects;
  VocabularyPadding padding;
};
using TensorKey = std::pair<std::int32_t, std::string>;  // (unit, tensor name)

// Every rank's holdings of every tensor of `part`, by tensor, in rank order.
std::map<TensorKey, std::vector<Holding>> holdings(const PlanPart& part, int world, bool gradient, bool needs) {
  std::map<TensorKey, std::vector<Holding>> out;
  for (int rank = 0; rank < world; ++rank)
    for (const ParameterUnitLayout& unit : plan_parameter_units(part, rank, 0)) {
      if (unit.replicas != GroupKind::data)
        throw std::invalid_argument("re-sharding between hot-switching layouts moves dense weights only (not experts)");
      const auto [begin, end] = valid_range(unit, part.strategy, gradient, needs);
      for (const WeightTensor& w : unit.tensors) {
        if (w.embedding_copy)
          throw std::invalid_argument(
              "re-sharding between hot-switching layouts with a copy of a tied embedding table on another stage");
        out[{unit.id, w.name}].push_back(
            {rank, w.elements(), rects_of(w, begin, end), vocabulary_padding(w, part.scenario.model.vocab_size)});
      }
    }
  return out;
}

bool same_rects(const std::vector<Rect>& a, const std::vector<Rect>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const Rect& x, const Rect& y) { return x.extent() == y.extent(); });
}

struct OwnerGroup {
  std::vector<Rect> rects;  // the first owner's placement (replicas lay a shard out alike)
  std::vector<int> ranks;
  std::map<int, std::vector<Rect>> placed;  // per owner: its own placement
};

const std::vector<OwnerGroup> kNoOwners;

// Per tensor, the ranks holding the same rectangles (data-parallel replicas) as one group, in rank order.
std::map<TensorKey, std::vector<OwnerGroup>> owner_groups(std::map<TensorKey, std::vector<Holding>> held_by_rank) {
  std::map<TensorKey, std::vector<OwnerGroup>> out;
  for (auto& [key, held] : held_by_rank) {
    std::vector<OwnerGroup>& groups = out[key];
    for (Holding& h : held) {
      if (h.rects.empty()) continue;
      auto same = std::find_if(groups.begin(), groups.end(),
                               [&](const OwnerGroup& g) { return same_rects(g.rects, h.rects); });
      if (same == groups.end()) same = groups.insert(groups.end(), OwnerGroup{h.rects, {}, {}});
      same->ranks.push_back(h.rank);
      same->placed[h.rank] = std::move(h.rects);
    }
  }
  return out;
}

}  // namespace

std::pair<std::int64_t, std::int64_t> gradient_start_range(const ParameterUnitLayout& unit) {
  if (unit.sharded_optimizer) return {unit.shard_begin, unit.shard_begin + unit.shard_elements};
  return unit.shard_begin == 0 ? std::pair<std::int64_t, std::int64_t>{0, unit.padded}
                               : std::pair<std::int64_t, std::int64_t>{0, 0};
}

std::vector<ReshardBlock> plan_resharding(const PlanPart& from, const PlanPart& to, const Cluster& cluster,
                                          bool gradients) {
  if (from.per_layer() || to.per_layer())
    throw std::invalid_argument("re-sharding between per-layer parts (a hot-switching plan's phases are uniform)");
  const int world = to.strategy.world_size();
  if (from.strategy.world_size() != world) throw std::invalid_argument("re-sharding between different world sizes");
  const int kinds = gradients ? 2 : 1;  // weights, then gradients
  std::vector<std::map<TensorKey, std::vector<OwnerGroup>>> owners(kinds);
  std::vector<std::map<TensorKey, std::vector<Holding>>> needs(kinds);
  for (int gradient = 0; gradient < kinds; ++gradient) {
    needs[gradient] = holdings(to, world, gradient, true);
    owners[gradient] = owner_groups(holdings(from, world, gradient, false));
  }
  SwitchSenders senders(cluster, world);
  std::vector<ReshardBlock> blocks;
  for (int receiver = 0; receiver < world; ++receiver)
    for (const auto& [key, unused] : needs[0])  // every tensor, in (unit, name) order
      for (int gradient = 0; gradient < kinds; ++gradient) {
        const std::vector<Holding>& by_rank = needs[gradient].at(key);
        const auto mine = std::find_if(by_rank.begin(), by_rank.end(), [&](const Holding& h) { return h.rank == receiver; });
        if (mine == by_rank.end()) continue;
        const auto found = owners[gradient].find(key);
        const std::vector<OwnerGroup>& groups = found == owners[gradient].end() ? kNoOwners : found->second;
        for (const Rect& need : mine->rects) {
          std::int64_t covered = 0;  // of the model's own elements; one held by nobody before: the check refuses
          for (const OwnerGroup& group : groups)
            for (std::size_t i = 0; i < group.rects.size(); ++i) {
              const std::optional<Rect> piece = overlap(need, group.rects[i]);
              if (!piece) continue;
              covered += mine->padding.real_elements(*piece);
              const bool holds = std::find(group.ranks.begin(), group.ranks.end(), receiver) != group.ranks.end();
              bool intra = false;
              const int sender =
                  holds ? receiver : senders.choose(group.ranks, receiver, piece->rows * piece->cols * 2, intra);
              blocks.push_back({sender, receiver, key.first, gradient == 1, piece->rows, piece->cols,
                                element_of(group.placed.at(sender)[i], piece->row, piece->col),
                                group.placed.at(sender)[i].ld, element_of(need, piece->row, piece->col), need.ld});
            }
          if (covered != mine->padding.real_elements(need))
            throw std::invalid_argument(fmt::format(
                "re-sharding: {} of {}'s {} rows {}..{}, columns {}..{} are held by no GPU before the switch",
                mine->padding.real_elements(need) - covered, key.second, gradient ? "gradients" : "weights", need.row,
                need.row + need.rows, need.col, need.col + need.cols));
        }
      }
  return blocks;
}

std::vector<std::pair<std::int32_t, std::vector<ReshardBlock>>> blocks_by_unit(const std::vector<ReshardBlock>& blocks) {
  // Model order: the embedding (kEmbeddingUnit) first, the layers by index, the output layer (kHeadUnit) last.
  const auto place = [](std::int32_t unit) -> std::int64_t {
    return unit == kEmbeddingUnit ? -1 : unit == kHeadUnit ? std::int64_t{1} << 40 : unit;
  };
  std::map<std::int64_t, std::pair<std::int32_t, std::vector<ReshardBlock>>> by_place;
  for (const ReshardBlock& b : blocks) {
    auto& [unit, list] = by_place[place(b.unit)];
    unit = b.unit;
    list.push_back(b);
  }
  std::vector<std::pair<std::int32_t, std::vector<ReshardBlock>>> out;
  for (auto& [place, unit_blocks] : by_place) out.push_back(std::move(unit_blocks));
  return out;
}

Bytes ReshardBytes::total() const {
  Bytes sum = 0;
  for (Bytes b : received) sum += b;
  return sum;
}

ReshardBytes reshard_bytes(const std::vector<ReshardBlock>& blocks, int world_size) {
  ReshardBytes out{std::vector<Bytes>(world_size, 0), std::vector<Bytes>(world_size, 0)};
  for (const ReshardBlock& b : blocks)
    if (b.from_rank != b.to_rank) {
      out.sent[b.from_rank] += b.elements() * 2;
      out.received[b.to_rank] += b.elements() * 2;
    }
  return out;
}

}  // namespace twin::exec
