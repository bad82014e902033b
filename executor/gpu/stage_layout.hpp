// Where a rank's stage sits in its plan part and how each unit it runs is laid out: the shapes, this GPU's place
// among the GPUs a unit's weights are split over and the communicators of its groups, the layers of each chunk, and
// which unit's output feeds which. What every handler of the interpreter reads; it changes nothing.
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/layer.hpp"
#include "core/op_graph.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "executor/op_binding.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/rank_layout.hpp"

namespace twin::exec {

// Pseudo unit of a chunk's received input activations: kReceivedUnit - chunk.
inline constexpr int kReceivedUnit = -10;

// A unit's layout: the shapes it runs with, this rank's place among the GPUs its weights are split over, and the
// communicators of its groups: `tensor` (its TP group, or the Ulysses group of its all-to-alls) and its weights'
// data group. Every unit has the part strategy's, but in a per-layer plan, whose layers (and the embedding and
// output layer beside them) each run as their UnitExecution says.
struct UnitLayout {
  lowering::RankShapes shapes;
  int tp_rank = 0;
  bool ulysses = false;
  ncclComm_t tensor = nullptr, tensor_optimizer = nullptr, data = nullptr;
};

// A micro-batch's rows as runs of sequences of one length (a row packing several sequences, a pack, is cut into
// its sequences; its unfilled end is one more): RoPE and attention run once per run.
struct EqualSequences {
  std::int64_t first_token = 0, sequences = 0, length = 0;
};

class StageLayout {
 public:
  // Rank `rank`'s stage of `plan_part` (which outlives it), its groups from `comms`.
  StageLayout(const PlanPart& plan_part, int rank, Communicators& comms);

  const PlanPart& plan_part() const { return plan_part_; }
  const Scenario& scenario() const { return plan_part_.scenario; }
  const Strategy& strategy() const { return plan_part_.strategy; }
  const RankCoordinates& me() const { return me_; }
  const lowering::RankShapes& shapes() const { return home_.shapes; }  // the part strategy's
  const UnitLayout& layout(int unit) const;
  // The most rows a unit's TP-gathered activations take (layouts differ in samples per micro-batch).
  std::int64_t most_tokens() const;
  // The unit an op works on: its layer, the embedding or the output layer.
  static int unit_of(const Op& op, const OpBinding& b);
  // The unit whose output feeds `unit` (kReceivedUnit - chunk for a received input), and a chunk's last layer.
  int previous_unit(int unit, int chunk) const;
  int first_unit(int chunk) const { return chunk_layers_.at(chunk).first; }
  int last_unit(int chunk) const { return chunk_layers_.at(chunk).second - 1; }
  // Rows of a micro-batch's inputs (the embedding's) and targets (the output layer's).
  std::int64_t input_tokens() const { return layout(kEmbeddingUnit).shapes.tokens; }
  std::int64_t target_tokens() const { return layout(kHeadUnit).shapes.tokens; }
  Recompute recompute_of(int layer) const { return plan_part_.unit_strategy(layer).recompute; }
  std::vector<EqualSequences> sequence_runs(int mb, const lowering::RankShapes& shapes) const;
  // The name under which a layer's output gradient arrives from the unit after it on this stage: the part through
  // that unit's norm, which the layer's MLP residual backward adds the stream's part to; with residual fusion, the
  // whole gradient (that norm's backward added the stream's part, and no residual op follows).
  Act arriving_output_gradient() const;

 private:
  const PlanPart& plan_part_;
  RankCoordinates me_;
  UnitLayout home_;                         // the part strategy's
  std::map<int, UnitLayout> unit_layouts_;  // the units of a per-layer plan
  std::map<int, std::pair<int, int>> chunk_layers_;  // chunk -> [first layer, end)
};

}  // namespace twin::exec
