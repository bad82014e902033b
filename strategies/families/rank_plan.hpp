// What a GPU needs from its plan's family to run the plan, stated by the family as data (issue 42): the
// sequences of the step's batch each of its parts reads, its coordinate among the data-parallel replicas, which
// parts share a parameter layout, the communicator groups of a plan whose stages are no uniform layout, the
// gradients summed across replicas that shard them differently, and the plan-check rules the family adds.
// twin execute (executor/) consumes this and plan_graphs.hpp's parts and never names a family: each family
// builds its data behind these functions (rank_plan.cpp), from its own folder's plan.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plan_file.hpp"
#include "strategies/families/plan_graphs.hpp"

namespace twin {

// A run of a micro-batch's sequences: [first, first + count) of it; or, `shards` above 1, of those sequences' rows
// (sample-major, seq_length each) the shard-th of `shards` contiguous equal runs: an embedding or output layer
// beside a Ulysses layer holds the rows its GPU holds of the samples its Ulysses group shares, as DeepSpeed-Ulysses
// shards the sequence from the input on (strategies/per_layer/per_layer.hpp).
struct SequenceRun {
  int first = 0, count = 0;
  int shard = 0, shards = 1;
  // Rows of the run, and its first row among its sequences' count * seq_length rows.
  std::int64_t rows(std::int64_t seq_length) const { return count * seq_length / shards; }
  std::int64_t first_row(std::int64_t seq_length) const { return shard * rows(seq_length); }
  bool operator==(const SequenceRun&) const = default;
};

// The sequences of the step's batch a GPU's part reads. Micro-batch m reads the inputs of sequences
// first_sequence + m * micro_batch_stride + inputs.first + i (i < inputs.count; of their rows, the run's shard) and
// the targets of those `targets` names likewise; iteration k's batch starts at sequence k * step_sequences. The
// part's rows are the sequences (or, for rows that pack several, the rows: PlanPart::packs). A context-parallel GPU
// keeps its chunks of each.
struct TokenShare {
  std::int64_t step_sequences = 0;      // sequences (rows) of one step's batch
  std::int64_t first_sequence = 0;
  std::int64_t micro_batch_stride = 0;  // sequences between the first sequences of two micro-batches
  int micro_batches = 0;
  SequenceRun inputs, targets;
  int context_parallel_size = 1, context_parallel_rank = 0;
  bool operator==(const TokenShare&) const = default;
};

// Part `part` of rank_parts(lowered, rank): the sequences GPU `rank` reads. A uniform or hot-switching part: its
// data-parallel rank's contiguous share, micro-batches one after another; a per-layer part: each micro-batch of
// the stage the run its embedding's block and its output layer's block work on; an asymmetric plan: its
// pipeline's share, after the earlier pipelines'.
TokenShare rank_token_share(const PlanGraphs& lowered, int rank, std::size_t part);

// GPU `rank`'s coordinate among the data-parallel replicas of part `part` (an asymmetric plan's: its pipeline).
int data_parallel_rank(const PlanGraphs& lowered, int rank, std::size_t part);

// Per part of the plan, the first part of its parameter layout: parts of one layout share their communicators
// and parameters, and the switch into a part of another moves the weights and gradients between the two.
std::vector<std::size_t> layout_owners(const PlanGraphs& lowered);

// The communicator groups of a plan whose stages are no uniform layout (an asymmetric plan: stages of their own TP
// sizes), each list disjoint groups of global ranks, each group in its members' order.
struct StageGroups {
  std::vector<std::vector<int>> tensor;  // each stage's GPUs
  std::vector<std::vector<int>> norm;    // the GPUs a gradient norm sums over
  // A boundary from stage `from_stage` to `to_stage` in every pipeline that has it: the sending stage's GPUs then
  // the receiving stage's; per group the two sides' GPU counts and whether each shards its rows (SP).
  struct Boundary {
    int from_stage = 0, to_stage = 0;
    std::vector<std::vector<int>> groups;
    std::vector<int> senders, receivers;
    std::vector<bool> senders_sharded, receivers_sharded;
  };
  std::vector<Boundary> boundaries;  // forward pairs then backward pairs, by stage
  std::vector<int> stage_of_rank;    // by global rank: its stage in its pipeline
};
// None for a plan whose parts each lay their GPUs out as a uniform strategy (strategies/rank_layout.hpp).
std::optional<StageGroups> stage_groups(const PlanGraphs& lowered);

// Gradients summed across replicas that shard them differently (an asymmetric plan's pipelines), segment by
// segment: a segment's units are held whole by one stage of every replica.
struct ReplicaSegment {
  std::vector<std::int32_t> units;         // parameter units (core/op.hpp), in model order
  std::vector<std::vector<int>> holders;   // per replica: the GPUs of its stage holding the segment, ascending
};
struct ReplicaReduction {
  std::vector<ReplicaSegment> segments;
  bool optimizer_sharded = false;  // ZeRO >= 1: the optimizer state is sharded over the replicas too
};
// None unless the plan has several replicas of different layouts.
std::optional<ReplicaReduction> replica_reduction(const PlanGraphs& lowered);

// The entry of a part's memory estimate (PlanPart::memory.per_stage) that prices a GPU of rank class `rank_class`
// on pipeline stage `stage` (a run file's class and coordinates): its stage, an asymmetric plan's stages pipeline
// by pipeline (its rank class).
std::size_t predicted_memory_entry(const PlanGraphs& lowered, int rank_class, int stage);

// Where the plan file holds part `part`'s strategy fields (what twin execute's plan check names), empty where the
// family checks its parts itself (an asymmetric plan: check_family_rules).
std::string part_strategy_path(const PlanGraphs& lowered, std::size_t part);

// GPUs whose parts (rank_parts) together hold every parameter layout the plan runs, and where the plan file
// says how they are laid out with what a refusal expects there: twin execute's plan check lays each out.
struct LayoutCheck {
  std::vector<int> ranks;
  std::string path, expected;
};
LayoutCheck layout_check(const PlanGraphs& lowered);

// The plan-check rules a family adds to twin execute's (executor/plan_check.hpp): throws InputError naming `file`
// and the family plan's key for what twin execute cannot run of it (a per-layer plan's blocks of partial samples,
// an asymmetric plan's stage that does not fit its GPU).
void check_family_rules(const Plan& plan, const PlanGraphs& lowered, const std::string& file);

}  // namespace twin
