// When a rank holds a parameter unit's weights or gradients whole, read off its rank class's op graph. Under ZeRO-3
// a unit's full bf16 weights exist from its param_gather op until the last op before its next gather (or the
// iteration's end) that reads them; under ZeRO >= 2 its full bf16 gradients exist from the first op after its last
// grad_reduce (or the iteration's start) that writes them until its next grad_reduce, which reduce-scatters them into
// the rank's shard. Between those windows the rank keeps only its shards (executor/gpu/stage_parameters.hpp), as
// Megatron's distributed optimizer and FSDP do, so the memory model's ZeRO-2/3 savings are real.
// Plain values, no GPU: computed once per rank class; executor/gpu/weight_residency_run.hpp applies them op by op.
#pragma once
#include <cstdint>
#include <set>
#include <vector>

#include "core/op_graph.hpp"
#include "executor/op_binding.hpp"
#include "executor/parameters.hpp"

namespace twin::exec {

// The unit an op works on: its layer, the embedding or the output layer (the interpreter's StageLayout::unit_of).
std::int32_t op_unit(const Op& op, const OpBinding& b);

// Where a linear's weight lives: its own unit, or with tied embeddings the output projection's in the embedding
// table (the table's unit where the stage holds it, else the table's copy in the output layer's unit), stored
// [vocab, hidden], the transpose of a linear's [in, out].
struct LinearHolder {
  std::int32_t unit = kNoParameterUnit;
  OpRole role = OpRole::none;  // the holder's tensor
  bool stored_out_by_in = false;
};
LinearHolder linear_holder(OpRole subject, std::int32_t unit, bool tied_embeddings, bool table_here);

// The parameter units an op touches: whose weights it reads, whose gradients it writes (a weight-gradient GEMM, a
// norm's or the embedding's backward, an MLA step's weight gradient), and the unit a param_gather fills or a
// grad_reduce empties (kNoParameterUnit: none). Reads and writes name the op's own unit beside a tied linear's
// holder (a linear's bias lives in its own unit): an op may name a unit whose buffer it does not touch, never miss one.
struct ParameterAccess {
  std::vector<std::int32_t> reads_weights, writes_gradients;
  std::int32_t gathers = kNoParameterUnit, reduces = kNoParameterUnit;
};
struct StageWeights {
  bool tied_embeddings = false;
  bool table_here = false;  // the stage holds the embedding table (stage_holds_embedding)
};
ParameterAccess parameter_access(const Op& op, const OpBinding& b, const StageWeights& stage);

enum class Residency : std::uint8_t { weights, gradients };

// One full buffer made or freed at an op, on the op's stream.
struct ResidencyChange {
  Residency buffer = Residency::weights;
  std::int32_t unit = kNoParameterUnit;
  // A release: the window's last op on each stream other than the releasing op's; the releasing op's stream waits
  // for them before the op runs, so no op of another stream still reads or writes the buffer when it is freed.
  std::vector<OpIndex> after;
  bool operator==(const ResidencyChange&) const = default;
};

struct OpResidency {
  std::vector<ResidencyChange> acquire;  // before the op (gradients: zeroed, the GEMMs accumulate into them)
  // The ops on other streams that made a buffer this op uses (once per window and stream): waited for before it.
  std::vector<OpIndex> waits;
  std::vector<ResidencyChange> release;  // after the op is issued (its stream waits for `after` before the op)
};

// The units whose full buffers come and go (ParameterUnitLayout::shards_weights, shards_gradients); every other
// unit keeps its full buffers for the run and has no window.
struct ShardedUnits {
  std::set<std::int32_t> weights, gradients;
  // Adds `unit` where it keeps only a shard of its weights or gradients.
  void add(const ParameterUnitLayout& unit) {
    if (unit.shards_weights()) weights.insert(unit.id);
    if (unit.shards_gradients()) gradients.insert(unit.id);
  }
  bool empty() const { return weights.empty() && gradients.empty(); }
};

class WeightResidency {
 public:
  WeightResidency() = default;
  // Throws std::logic_error naming the op where the graph would use a buffer outside every window: weights read
  // before the unit's first gather, gradients written after its last reduction.
  WeightResidency(const RankClass& rc, const std::vector<OpBinding>& bindings, const ShardedUnits& units,
                  const StageWeights& stage);

  const OpResidency& at(OpIndex op) const { return ops_.at(static_cast<std::size_t>(op)); }
  bool empty() const { return windows_ == 0; }
  int windows() const { return windows_; }

 private:
  std::vector<OpResidency> ops_;
  int windows_ = 0;
};

// A gradient window starts from a fresh buffer: after a reduction of a unit `units` shards the gradients of, the next
// writer of each of the unit's weights stores rather than adds (OpBinding::first_gradient, first_position_gradient),
// as the step's first writer does. Only adds first writers: those of the step, and every writer of a unit with whole
// buffers, keep their flags. Call on the bindings of a step's first part (a later part adds to what earlier parts left).
void mark_window_first_gradients(const RankClass& rc, std::vector<OpBinding>& bindings, const ShardedUnits& units,
                                 const StageWeights& stage);

}  // namespace twin::exec
