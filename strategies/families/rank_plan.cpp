// Each family's answer from its own plan: a uniform or hot-switching part from its strategy's layout
// (strategies/rank_layout.hpp), a per-layer part from its blocks (strategies/per_layer/per_layer.hpp), an
// asymmetric plan from its pipelines and stages (strategies/heterogeneous/asymmetric_plan.hpp).
#include "strategies/families/rank_plan.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/layout_switch.hpp"
#include "strategies/per_layer/per_layer_edges.hpp"
#include "strategies/rank_layout.hpp"

namespace twin {
namespace {

// Where GPU `rank` runs in an asymmetric plan: its pipeline and stage.
struct PipelineStage {
  int pipeline = 0, stage = 0;
};
PipelineStage pipeline_stage(const AsymmetricPlanDetail& plan, int rank) {
  for (int p = 0; p < static_cast<int>(plan.pipelines.size()); ++p)
    for (int s = 0; s < static_cast<int>(plan.pipelines[p].stages.size()); ++s) {
      const std::vector<int>& devices = plan.pipelines[p].stages[s].devices;
      if (std::find(devices.begin(), devices.end(), rank) != devices.end()) return {p, s};
    }
  throw std::invalid_argument(fmt::format("the asymmetric plan runs no stage on GPU {}", rank));
}

// Sequences of the global batch before pipeline `pipeline`'s share (an asymmetric plan's pipelines in order).
std::int64_t pipeline_first_sequence(const AsymmetricPlanDetail& plan, int pipeline) {
  std::int64_t first = 0;
  for (int p = 0; p < pipeline; ++p)
    first += static_cast<std::int64_t>(plan.pipelines[p].micro_batch_size) * plan.pipelines[p].num_micro_batches;
  return first;
}

// A per-layer part: micro-batch m of a stage is the batch's sequences [m B, (m + 1) B); the GPU reads the inputs
// of the rows its embedding works on and the targets of its output layer's (edge_rows beside the first and the
// last layer: a block's samples, or beside a Ulysses layer the GPU's shard of its Ulysses block's rows).
void per_layer_share(const PlanGraphs& lowered, int rank, TokenShare& share) {
  const PerLayerPlan& plan = *lowered.per_layer;
  const int gpus = stage_gpus(lowered.scenario, plan), gpu = rank % gpus;
  const auto run = [&](const LayerStrategy& beside) {
    const EdgeRows rows = edge_rows(beside.layout, gpus, plan.stage_micro_batch, gpu);
    return SequenceRun{rows.block.first, rows.block.count, rows.shard, rows.shards};
  };
  share.step_sequences = static_cast<std::int64_t>(plan.stage_micro_batch) * plan.num_micro_batches;
  share.first_sequence = 0;
  share.micro_batch_stride = plan.stage_micro_batch;
  share.micro_batches = plan.num_micro_batches;
  share.inputs = run(plan.layers.front());
  share.targets = run(plan.layers.back());
}

// The units of a segment [first_unit, end_unit) in model order, as parameter units.
std::vector<std::int32_t> segment_units(const ModelConfig& model, const GradientSegment& segment) {
  std::vector<std::int32_t> units;
  std::vector<std::int32_t> all = {kEmbeddingUnit};
  for (std::int32_t layer = 0; layer < model.num_layers; ++layer) all.push_back(layer);
  all.push_back(kHeadUnit);
  for (std::int32_t unit : all) {
    const int at = model_order_unit(model, unit);
    if (at >= segment.first_unit && at < segment.end_unit) units.push_back(unit);
  }
  return units;
}

}  // namespace

TokenShare rank_token_share(const PlanGraphs& lowered, int rank, std::size_t part) {
  const PlanPart here = rank_parts(lowered, rank).at(part);
  const Strategy& s = here.strategy;
  const RankCoordinates at = coordinates_of(s, here.layout_rank(rank));
  TokenShare share;
  share.context_parallel_size = s.context_parallel_size;
  share.context_parallel_rank = at.cp;
  if (here.per_layer()) {
    per_layer_share(lowered, rank, share);
    return share;
  }
  share.micro_batch_stride = s.micro_batch_size;
  share.micro_batches = s.num_micro_batches;
  share.inputs = share.targets = {0, s.micro_batch_size};
  if (lowered.asymmetric) {  // the pipeline's share of the plan's global batch
    share.step_sequences = lowered.scenario.training.global_batch_size;
    share.first_sequence =
        pipeline_first_sequence(*lowered.asymmetric, pipeline_stage(*lowered.asymmetric, rank).pipeline);
    return share;
  }
  // The data-parallel rank's contiguous share of the part's rows (a hot-switching phase's packs included).
  share.step_sequences = here.scenario.training.global_batch_size;
  share.first_sequence = at.dp * (share.step_sequences / s.data_parallel_size);
  return share;
}

int data_parallel_rank(const PlanGraphs& lowered, int rank, std::size_t part) {
  if (lowered.asymmetric) return pipeline_stage(*lowered.asymmetric, rank).pipeline;
  const PlanPart& here = lowered.parts.at(part);
  return coordinates_of(here.strategy, here.layout_rank(rank)).dp;
}

std::vector<std::size_t> layout_owners(const PlanGraphs& lowered) {
  const std::size_t part_count = lowered.parts.size();
  std::vector<std::size_t> layout_of(part_count);
  for (std::size_t p = 0; p < part_count; ++p) {
    layout_of[p] = p;
    for (std::size_t q = 0; q < p && layout_of[p] == p; ++q)
      if (same_parameter_layout(lowered.parts[q].strategy, lowered.parts[p].strategy)) layout_of[p] = layout_of[q];
  }
  return layout_of;
}

std::optional<StageGroups> stage_groups(const PlanGraphs& lowered) {
  if (!lowered.asymmetric) return std::nullopt;
  const AsymmetricPlanDetail& plan = *lowered.asymmetric;
  StageGroups out;
  out.stage_of_rank.assign(static_cast<std::size_t>(lowered.world_size()), 0);
  std::size_t deepest = 0;
  for (const AsymmetricPipeline& pipeline : plan.pipelines) {
    std::vector<int> all;
    for (std::size_t s = 0; s < pipeline.stages.size(); ++s) {
      const std::vector<int>& devices = pipeline.stages[s].devices;
      out.tensor.push_back(devices);
      all.insert(all.end(), devices.begin(), devices.end());
      for (int rank : devices) out.stage_of_rank.at(static_cast<std::size_t>(rank)) = static_cast<int>(s);
    }
    out.norm.push_back(all);
    deepest = std::max(deepest, pipeline.stages.size());
  }
  for (int backward = 0; backward < 2; ++backward)
    for (int s = 0; s + 1 < static_cast<int>(deepest); ++s) {
      StageGroups::Boundary boundary;
      boundary.from_stage = backward ? s + 1 : s;
      boundary.to_stage = backward ? s : s + 1;
      for (const AsymmetricPipeline& pipeline : plan.pipelines) {
        if (static_cast<int>(pipeline.stages.size()) <= s + 1) continue;
        const AsymmetricStage& from = pipeline.stages[static_cast<std::size_t>(boundary.from_stage)];
        const AsymmetricStage& to = pipeline.stages[static_cast<std::size_t>(boundary.to_stage)];
        std::vector<int> group = from.devices;
        group.insert(group.end(), to.devices.begin(), to.devices.end());
        boundary.groups.push_back(std::move(group));
        // A side shards the rows where its stage runs sequence parallel (stage_strategy: the shared switch, TP > 1).
        boundary.senders.push_back(static_cast<int>(from.devices.size()));
        boundary.receivers.push_back(static_cast<int>(to.devices.size()));
        const auto sharded = [&](int stage) { return stage_strategy(plan.shared, pipeline, stage).sequence_parallel; };
        boundary.senders_sharded.push_back(sharded(boundary.from_stage));
        boundary.receivers_sharded.push_back(sharded(boundary.to_stage));
      }
      out.boundaries.push_back(std::move(boundary));
    }
  // Under ZeRO-1 a GPU's parts hold elements of every pipeline's copy: the gradient norm sums over every GPU.
  if (plan.shared.zero_stage >= 1 && plan.pipelines.size() > 1) {
    std::vector<int> all;
    for (const std::vector<int>& p : out.norm) all.insert(all.end(), p.begin(), p.end());
    std::sort(all.begin(), all.end());
    out.norm = {all};
  }
  return out;
}

std::optional<ReplicaReduction> replica_reduction(const PlanGraphs& lowered) {
  if (!lowered.asymmetric || lowered.asymmetric->pipelines.size() < 2) return std::nullopt;
  const AsymmetricPlanDetail& plan = *lowered.asymmetric;
  ReplicaReduction out;
  out.optimizer_sharded = plan.shared.zero_stage >= 1;
  for (const GradientSegment& segment : gradient_segments(lowered.scenario.model, plan.pipelines)) {
    ReplicaSegment& mine = out.segments.emplace_back();
    mine.units = segment_units(lowered.scenario.model, segment);
    for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
      const std::size_t stage = static_cast<std::size_t>(segment.stage_of_pipeline[p]);
      std::vector<int> ranks = plan.pipelines[p].stages.at(stage).devices;
      std::sort(ranks.begin(), ranks.end());
      mine.holders.push_back(std::move(ranks));
    }
  }
  return out;
}

std::size_t predicted_memory_entry(const PlanGraphs& lowered, int rank_class, int stage) {
  return static_cast<std::size_t>(lowered.asymmetric ? rank_class : stage);
}

std::string part_strategy_path(const PlanGraphs& lowered, std::size_t part) {
  if (lowered.asymmetric) return "";
  return lowered.phases.empty() ? "/strategy" : fmt::format("/family_plan/detail/phases/{}/strategy_fields", part);
}

LayoutCheck layout_check(const PlanGraphs& lowered) {
  LayoutCheck out;
  if (lowered.asymmetric) {  // every GPU its stage's layout
    for (int rank = 0; rank < lowered.world_size(); ++rank) out.ranks.push_back(rank);
    out.path = "/family_plan/detail/pipelines";
    out.expected = "an asymmetric plan twin execute runs";
    return out;
  }
  std::set<int> ranks;  // each part's stages' first GPUs
  for (const PlanPart& part : lowered.parts)
    for (int stage = 0; stage < part.strategy.pipeline_model_parallel_size; ++stage)
      ranks.insert(static_cast<int>(stage * part.strategy.world_size() / part.strategy.pipeline_model_parallel_size));
  out.ranks.assign(ranks.begin(), ranks.end());
  out.path = "/scenario/model";
  out.expected = "a model and strategy twin execute runs";
  return out;
}

}  // namespace twin
