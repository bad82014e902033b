// Hot switching's re-sharding as twin execute runs it: between two parts of a step in different layouts, which
// elements of each weight every GPU holds in the part before and needs in the part after, as rectangles of the
// full weight in each GPU's unit buffers, and who sends each rectangle to whom. The simulator's switch plan
// (strategies/hot_switch/hot_switch_resharding.hpp; what both share: strategies/layout_switch.hpp) follows the
// same rules on its abstract slices:
// - bf16 weights: a GPU holds its TP shard, or under ZeRO-3 only its data-parallel shard of the unit; it needs
//   the same of the layout after;
// - gradients, as the part before left them after its reduction (the whole TP shard under ZeRO-0, the GPU's
//   shard under ZeRO >= 1), go to one GPU of each reduction group of the part after (reduction_target: the
//   shard's owner, or the group's first GPU under ZeRO-0), where they are the value the part's gradients start
//   from: the part's own reduction adds them in once;
// - a rectangle a GPU holds already is copied on it; any other comes from an owner on the receiver's node when
//   there is one, else any owner, the one with the fewest bytes assigned so far (HotSPa's NEW_GREEDY).
// - vocabulary padding the layout after holds and no GPU held before (Megatron pads the vocabulary to a multiple of
//   128 x TP: TP 4 pads 32,000 to 32,256, TP 2 not at all) is not moved: the receiver keeps what its own buffers
//   hold there, the value every layout initialises that element to (executor/gpu/stage_parameters.hpp: by its
//   index in the full weight), or the home layout's own steps of it; its gradients there start from zero. Padding
//   held before is moved like any element.
// Plain values, no GPU; every rank computes the same plan. executor/gpu/resharding_run.hpp runs it.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/units.hpp"
#include "executor/parameters.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin::exec {

// A rectangle of a weight moved from one GPU's unit buffer to another's (or within one GPU: from_rank ==
// to_rank): `rows` x `cols` elements, row r starting at from_first + r * from_ld in the sender's buffer and at
// to_first + r * to_ld in the receiver's (elements of the unit's flat bf16 parameter or gradient buffer).
struct ReshardBlock {
  int from_rank = 0, to_rank = 0;
  std::int32_t unit = 0;  // the parameter unit (a layer, kEmbeddingUnit or kHeadUnit), the same in both layouts
  bool gradient = false;  // gradients, else bf16 weights
  std::int64_t rows = 0, cols = 0;
  std::int64_t from_first = 0, from_ld = 0, to_first = 0, to_ld = 0;
  std::int64_t elements() const { return rows * cols; }
  bool operator==(const ReshardBlock&) const = default;
};

// The part [begin, end) of a unit's gradient buffer a GPU starts a later part of the step with (the earlier parts'
// reduced gradients there, zeros elsewhere): its shard under ZeRO >= 1, all of it on the data group's first GPU
// under ZeRO-0, none on the others (strategies/layout_switch.hpp's reduction_target).
std::pair<std::int64_t, std::int64_t> gradient_start_range(const ParameterUnitLayout& unit);

// The switch from part `from` to part `to` of one step (uniform parts of the same model and world size): the
// weights, and the gradients when `gradients`; blocks in one global order (receiver, unit, tensor, weights before
// gradients, sender). Throws std::invalid_argument where `to` needs an element of the model `from` holds nowhere,
// where a unit holds a tied embedding's copy or experts, or where the parts are not uniform.
std::vector<ReshardBlock> plan_resharding(const PlanPart& from, const PlanPart& to, const Cluster& cluster,
                                          bool gradients);

// The plan cut by parameter unit, in model order (the embedding, the layers, the output layer): each unit's
// blocks in plan order, so that a switch can run unit by unit and a unit's ops wait for its own blocks only.
std::vector<std::pair<std::int32_t, std::vector<ReshardBlock>>> blocks_by_unit(const std::vector<ReshardBlock>& blocks);

// What crosses between GPUs (blocks with from_rank != to_rank), per rank, in bytes of bf16 elements.
struct ReshardBytes {
  std::vector<Bytes> sent, received;
  Bytes total() const;
};
ReshardBytes reshard_bytes(const std::vector<ReshardBlock>& blocks, int world_size);

}  // namespace twin::exec
