// An asymmetric plan's gradient reduction across its pipelines as twin execute runs it. Every pipeline holds
// every weight, on stages cut at other layers with other TP sizes; after a gradient segment's last backward
// (strategies/heterogeneous/asymmetric_plan.hpp) each GPU's gradients of the segment are summed with the other
// pipelines' copies of the same elements:
// - each weight is cut by all its holders' rectangles (executor/weight_rects.hpp) into pieces; a piece's holders
//   are the GPUs, over all pipelines, whose shard holds it: one per pipeline for a TP-sharded weight, every GPU
//   of a stage for a weight TP replicates (norm weights);
// - every element is held by every pipeline, but for a vocabulary padded further on a pipeline of a larger TP size
//   (Megatron pads to a multiple of 128 x TP): those padding rows are reduced over the pipelines holding them;
// - a segment's pieces with the same holders form one reduction: every holder packs them in one order and the
//   holders all-reduce them over a communicator of their own, each holder's part scaled first by `scale` (NCCL's
//   pre-multiplied sum): 1 / its pipeline's holders, so that a replicated weight counts once per pipeline;
//   1 on a sequence-parallel stage, whose replicas each hold the sum over their own tokens only;
// - afterwards every holder has the sum over the pipelines, so a sequence-parallel stage's replicated weights
//   need no sum over TP later (the runtime's optimizer fixups skip it).
// The simulator prices the same bytes as a ring per segment; every GPU moves its own shard's share.
// Plain values, no GPU; every rank computes the same plan. executor/gpu/pipeline_reduction_run.hpp runs it.
#pragma once
#include <cstdint>
#include <vector>

#include "strategies/families/plan_graphs.hpp"

namespace twin::exec {

// A rectangle of a unit's gradient buffer: `rows` x `cols` elements, row r at first + r * ld.
struct ReductionPiece {
  std::int32_t unit = 0;
  std::int64_t rows = 0, cols = 0, first = 0, ld = 0;
  std::int64_t elements() const { return rows * cols; }
  bool operator==(const ReductionPiece&) const = default;
};

struct PipelineReduction {
  int segment = 0;
  std::vector<int> ranks;                           // the holders, ascending
  std::vector<std::vector<ReductionPiece>> pieces;  // per holder (as `ranks`): its pieces, in one order for all
  std::vector<double> scale;                        // per holder
  std::int64_t elements = 0;                        // per holder
};

// Every segment's reductions, segment by segment, each segment's in the order of their first piece. Throws
// std::invalid_argument where a weight's element (other than vocabulary padding) is not held by every pipeline.
std::vector<PipelineReduction> plan_pipeline_reduction(const PlanGraphs& lowered);

// The holders' sets, each once, cut into rounds of disjoint sets: a communicator split per round serves all of
// its sets (executor/gpu/communicators.hpp).
std::vector<std::vector<std::vector<int>>> reduction_group_rounds(const std::vector<PipelineReduction>& reductions);

}  // namespace twin::exec
