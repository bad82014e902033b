// The op graphs of a plan file as the simulator priced them, for the commands that run or read a plan (twin
// execute, twin report, twin calibrate --from-trace), with the parts each GPU runs one after another: a
// uniform plan is one part, a hot-switching plan one part per phase (each phase a rank class per GPU), a
// per-layer plan one part whose layers say their own recompute, an asymmetric plan one part whose GPUs each run
// their stage as asymmetric_rank_part describes it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "core/plan_file.hpp"
#include "strategies/flops.hpp"
#include "strategies/heterogeneous/asymmetric_plan_file.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"
#include "strategies/memory.hpp"
#include "strategies/per_layer/per_layer.hpp"

namespace twin {

struct PlanPart {
  Scenario scenario;               // what the part is lowered with (a phase: its pack length, its packs as the batch)
  Strategy strategy;               // complete for `scenario`
  std::vector<int> class_of_rank;  // the rank class each global rank runs in this part
  // Per sequence row of the part's batch (in batch order), the lengths of the sequences it packs; empty when
  // every row is one sequence of scenario.training.seq_length.
  std::vector<std::vector<std::int64_t>> packs;
  // A per-layer plan: how each transformer layer, the embedding and the output layer run (layer_execution,
  // edge_execution), and the layers per stage. Empty when every unit runs as `strategy`, split as it splits them.
  std::vector<UnitExecution> layer_units;
  UnitExecution embedding_unit, head_unit;
  std::vector<int> stage_layers;
  bool per_layer() const { return !layer_units.empty(); }
  // How unit `unit` (a layer, kEmbeddingUnit or kHeadUnit) of a per-layer plan runs; null for another plan.
  const UnitExecution* unit_execution(std::int32_t unit) const;
  // The strategy the weights of unit `unit` are laid out under: its UnitExecution's, else `strategy`.
  const Strategy& unit_strategy(std::int32_t unit) const;
  // A per-layer part's first transformer layer of pipeline stage `stage` (stage = stages: the number of layers).
  int first_layer(int stage) const;
  MemoryEstimate memory;           // per stage, as the simulator estimated it
  // The rank each global rank has in `strategy`'s layout (coordinates_of, group_slot); empty: its own. An
  // asymmetric plan's rank part lays its stage out as a uniform pipeline of the stage's TP size: a GPU of stage s
  // is s * tp + its place among the stage's devices. -1: a GPU the part's layout does not hold.
  std::vector<int> layout_ranks;
  int layout_rank(int rank) const;
  // Sequence rows (tokens) the part's iteration trains: global_batch_size * seq_length of its scenario.
  std::int64_t tokens() const { return scenario.training.global_batch_size * scenario.training.seq_length; }
};

struct PlanGraphs {
  std::string key;              // the plan's: its strategy's key, or the family plan's ("hot-switch:...")
  Scenario scenario;            // the plan's
  IterationGraph graph;         // as best.json's rank_classes name its ops
  std::vector<PlanPart> parts;  // in run order; the last one steps the optimizer
  std::vector<HotSwitchPhase> phases;  // hot switching: parts[p]'s phase
  std::optional<PerLayerPlan> per_layer;  // a per-layer plan's layers
  std::optional<AsymmetricPlanDetail> asymmetric;  // an asymmetric plan's pipelines
  std::string family() const;   // "uniform", "hot-switch", "per-layer" or "heterogeneous"
  // GPUs the plan runs on (an asymmetric plan: its stages' devices, which must be 0 .. n-1).
  int world_size() const;
  // Tokens the iteration trains (every row of every part, padding packs included): what the loss averages over.
  std::int64_t tokens_per_step() const;
  // Tokens per second and MFU of an iteration of `iteration_s`, as the simulator reports the plan's (a
  // hot-switching plan: real tokens, model FLOPs per sequence of its own length).
  Throughput throughput(double iteration_s) const;
};

// The one part of a per-layer plan whose home strategy is `home` (the plan file's strategy): each layer's
// strategy, the split, the memory; class_of_rank left empty.
PlanPart per_layer_part(const Scenario& scenario, const PerLayerPlan& plan, const Strategy& home);

// An asymmetric plan's graphs (plan_graphs reads one from a plan file): one part whose strategy is the shared
// fields, each GPU's class its stage's. Throws std::invalid_argument unless the stages' devices are 0 .. n-1.
PlanGraphs asymmetric_plan_graphs(const Scenario& scenario, AsymmetricPlanDetail detail);

// How global rank `rank` runs an asymmetric plan: its stage as a uniform pipeline of its pipeline's depth and the
// stage's TP size (stage_strategy: data-parallel size 1, the pipeline's micro-batches), the pipeline's layer split
// (stage_layers), its batch share as the scenario's global batch, its stage's place in `layout_ranks`, each of the
// pipeline's stages' memory; class_of_rank as the plan's part has it. Throws std::invalid_argument for a GPU no
// stage holds.
PlanPart asymmetric_rank_part(const PlanGraphs& lowered, int rank);

// The parts as global rank `rank` runs them, in run order: the plan's, an asymmetric plan's as its stage runs it
// (asymmetric_rank_part).
std::vector<PlanPart> rank_parts(const PlanGraphs& lowered, int rank);

// Throws InputError naming `source` for a family plan that does not follow from its scenario.
PlanGraphs plan_graphs(const Plan& plan, const std::string& source);

}  // namespace twin
