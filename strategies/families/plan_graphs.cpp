// A uniform plan lowers its strategy; a hot-switching plan rebuilds its phases from the file and the
// iteration graph from them (strategies/hot_switch/), whose classes are phase-major: phase * world + rank.
#include "strategies/families/plan_graphs.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "cost/profile.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/heterogeneous/asymmetric_plan_file.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan_file.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"
#include "strategies/lowering.hpp"
#include "strategies/per_layer/per_layer_plan_file.hpp"
#include "strategies/rank_layout.hpp"

namespace twin {

PlanPart per_layer_part(const Scenario& scenario, const PerLayerPlan& plan, const Strategy& home) {
  PlanPart part;
  part.scenario = scenario;
  part.strategy = home;
  part.memory = estimate_per_layer_memory(scenario, plan);
  for (int layer = 0; layer < static_cast<int>(plan.layers.size()); ++layer)
    part.layer_units.push_back(layer_execution(scenario, plan, layer));
  part.embedding_unit = edge_execution(scenario, plan, true);
  part.head_unit = edge_execution(scenario, plan, false);
  part.stage_layers = plan.stage_layers;
  return part;
}

namespace {

// Each rank's class in a graph of one class per pipeline stage (a uniform or per-layer lowering, one
// hot-switching phase alone): the class of its stage.
std::vector<int> classes_by_stage(const IterationGraph& graph, const Strategy& strategy, int world) {
  std::vector<int> classes;
  for (int rank = 0; rank < world; ++rank) {
    const int stage = coordinates_of(strategy, rank).pp;
    const auto rc = std::find_if(graph.classes.begin(), graph.classes.end(),
                                 [&](const RankClass& c) { return c.stage == stage && c.pipeline == 0; });
    if (rc == graph.classes.end())
      throw std::invalid_argument(fmt::format("the plan has no rank class for pipeline stage {}", stage));
    classes.push_back(rc->index);
  }
  return classes;
}

PlanGraphs uniform(const Plan& plan) {
  PlanGraphs out;
  out.key = plan.strategy.key();
  out.scenario = plan.scenario;
  out.graph = lower_to_op_graphs(plan.scenario, plan.strategy);
  PlanPart part;
  part.scenario = plan.scenario;
  part.strategy = plan.strategy;
  part.memory = estimate_memory(plan.scenario, plan.strategy);
  part.class_of_rank = classes_by_stage(out.graph, plan.strategy, static_cast<int>(plan.strategy.world_size()));
  out.parts.push_back(std::move(part));
  return out;
}

PlanGraphs hot_switch(const Plan& plan, const std::string& source) {
  const std::vector<HotSwitchPhase> phases = read_hot_switch_phases(plan, source);
  PlanGraphs out;
  out.scenario = plan.scenario;
  out.phases = phases;
  HotSwitchPlan named;
  named.phases = phases;
  out.key = named.key();
  const std::vector<SeqLengthCount> batch = batch_sequences(plan.scenario);
  // The profile prices double strand's pairing only, which no phase runs.
  out.graph = phases.size() == 1 ? lower_phase(plan.scenario, phases[0], builtin_profile(), true)
                                 : build_hot_switch_iteration(plan.scenario, phases, builtin_profile()).graph;
  const int world = plan.scenario.cluster.total_gpus();
  for (std::size_t p = 0; p < phases.size(); ++p) {
    PlanPart part;
    part.scenario = phase_scenario(plan.scenario, phases[p].workload, phases[p].packs);
    part.strategy = phases[p].strategy;
    if (phases.size() == 1) part.class_of_rank = classes_by_stage(out.graph, part.strategy, world);
    for (int rank = 0; rank < world && phases.size() > 1; ++rank)
      part.class_of_rank.push_back(static_cast<int>(p) * world + rank);
    part.packs = phase_packs(batch, phases[p].workload, phases[p].packs);
    part.memory = estimate_memory(part.scenario, part.strategy);
    out.parts.push_back(std::move(part));
  }
  return out;
}

PlanGraphs per_layer(const Plan& plan, const std::string& source) {
  PerLayerPlan layers = read_per_layer_plan(plan, source);
  PlanGraphs out;
  out.key = layers.key();
  out.scenario = plan.scenario;
  out.graph = lower_per_layer_plan(plan.scenario, layers);
  // The home strategy's micro-batches are the plan's: the file's are derived from the home's micro-batch size, which
  // rounds up to one sample where a Ulysses home's stage micro-batch holds fewer samples than GPUs.
  Strategy home = plan.strategy;
  home.num_micro_batches = layers.num_micro_batches;
  PlanPart part = per_layer_part(plan.scenario, layers, home);
  part.class_of_rank = classes_by_stage(out.graph, home, static_cast<int>(home.world_size()));
  out.parts.push_back(std::move(part));
  out.per_layer = std::move(layers);
  return out;
}

PlanGraphs asymmetric(const Plan& plan, const std::string& source) {
  AsymmetricPlanDetail detail = read_asymmetric_plan(plan, source);
  try {
    return asymmetric_plan_graphs(plan.scenario, std::move(detail));
  } catch (const std::invalid_argument& error) {
    JsonReader(plan.document, source, "/family_plan/detail/pipelines").fail_plain(error.what());
  }
}

}  // namespace

// Classes are pipeline by pipeline, stage by stage (lower_asymmetric_plan): a GPU runs its stage's class.
PlanGraphs asymmetric_plan_graphs(const Scenario& scenario, AsymmetricPlanDetail detail) {
  PlanGraphs out;
  out.key = asymmetric_plan_key(detail.shared, detail.pipelines);
  out.scenario = scenario;
  out.graph = lower_asymmetric_plan(scenario, detail.shared, detail.pipelines);
  PlanPart part;
  part.scenario = scenario;
  part.strategy = detail.shared;
  asymmetric_out_of_memory_reason(scenario, detail.shared, detail.pipelines, part.memory);
  int devices = 0;
  for (const AsymmetricPipeline& pipeline : detail.pipelines)
    for (const AsymmetricStage& stage : pipeline.stages) devices += static_cast<int>(stage.devices.size());
  part.class_of_rank.assign(static_cast<std::size_t>(devices), -1);
  int rank_class = 0;
  for (std::size_t p = 0; p < detail.pipelines.size(); ++p)
    for (const AsymmetricStage& stage : detail.pipelines[p].stages) {
      for (int device : stage.devices) {
        if (device >= devices)
          throw std::invalid_argument(fmt::format("the plan's {} GPUs numbered 0 to {} (twin execute runs a GPU per "
                                                  "rank); pipeline {} uses GPU {}", devices, devices - 1, p, device));
        part.class_of_rank[static_cast<std::size_t>(device)] = rank_class;
      }
      ++rank_class;
    }
  out.parts.push_back(std::move(part));
  out.asymmetric = std::move(detail);
  return out;
}

PlanPart asymmetric_rank_part(const PlanGraphs& lowered, int rank) {
  const AsymmetricPlanDetail& plan = lowered.asymmetric.value();
  for (const AsymmetricPipeline& pipeline : plan.pipelines)
    for (int s = 0; s < static_cast<int>(pipeline.stages.size()); ++s) {
      const std::vector<int>& devices = pipeline.stages[s].devices;
      const auto at = std::find(devices.begin(), devices.end(), rank);
      if (at == devices.end()) continue;
      PlanPart part;
      part.scenario = lowered.scenario;
      part.scenario.training.global_batch_size =
          static_cast<std::int64_t>(pipeline.micro_batch_size) * pipeline.num_micro_batches;
      part.strategy = stage_strategy(plan.shared, pipeline, s);
      part.class_of_rank = lowered.parts.front().class_of_rank;
      for (const AsymmetricStage& stage : pipeline.stages) part.stage_layers.push_back(stage.num_layers);
      part.layout_ranks.assign(part.class_of_rank.size(), -1);
      const int tp = pipeline.stages[s].tensor_model_parallel_size;
      for (std::size_t i = 0; i < devices.size(); ++i)
        part.layout_ranks.at(static_cast<std::size_t>(devices[i])) = s * tp + static_cast<int>(i);
      for (int stage = 0; stage < static_cast<int>(pipeline.stages.size()); ++stage)
        part.memory.per_stage.push_back(asymmetric_stage_memory(lowered.scenario, plan.shared, pipeline, stage,
                                                                static_cast<int>(plan.pipelines.size())));
      part.memory.worst_stage = s;
      return part;
    }
  throw std::invalid_argument(fmt::format("the asymmetric plan runs no stage on GPU {}", rank));
}

std::vector<PlanPart> rank_parts(const PlanGraphs& lowered, int rank) {
  if (lowered.asymmetric) return {asymmetric_rank_part(lowered, rank)};
  return lowered.parts;
}

int PlanPart::layout_rank(int rank) const {
  if (layout_ranks.empty()) return rank;
  const int at = layout_ranks.at(static_cast<std::size_t>(rank));
  if (at < 0) throw std::logic_error(fmt::format("GPU {} is not in this part's layout", rank));
  return at;
}

const UnitExecution* PlanPart::unit_execution(std::int32_t unit) const {
  if (!per_layer()) return nullptr;
  if (unit == kEmbeddingUnit) return &embedding_unit;
  if (unit == kHeadUnit) return &head_unit;
  if (unit < 0) throw std::logic_error(fmt::format("a per-layer plan has no unit {}", unit));
  return &layer_units.at(static_cast<std::size_t>(unit));
}

const Strategy& PlanPart::unit_strategy(std::int32_t unit) const {
  const UnitExecution* execution = unit_execution(unit);
  return execution ? execution->weights : strategy;
}

int PlanPart::first_layer(int stage) const { return first_layer_of_split(stage_layers, stage); }

std::string PlanGraphs::family() const {
  if (per_layer) return "per-layer";
  if (asymmetric) return "heterogeneous";
  return phases.empty() ? "uniform" : "hot-switch";
}

int PlanGraphs::world_size() const {
  if (asymmetric) return static_cast<int>(parts.front().class_of_rank.size());
  return static_cast<int>(parts.front().strategy.world_size());
}

std::int64_t PlanGraphs::tokens_per_step() const {
  std::int64_t tokens = 0;
  for (const PlanPart& part : parts) tokens += part.tokens();
  return tokens;
}

Throughput PlanGraphs::throughput(double iteration_s) const {
  if (per_layer) return per_layer_throughput(scenario, *per_layer, parts.front().strategy, iteration_s);
  if (asymmetric) return asymmetric_throughput(scenario, asymmetric->shared, asymmetric->pipelines, iteration_s);
  if (phases.empty()) return twin::throughput(parts.front().scenario, parts.front().strategy, iteration_s);
  return hot_switch_throughput(scenario, batch_sequences(scenario), phases, iteration_s);
}

PlanGraphs plan_graphs(const Plan& plan, const std::string& source) {
  const auto family = plan.document.find("family_plan");
  if (family == plan.document.end() || family->is_null()) return uniform(plan);
  const std::string name = family->is_object() ? family->value("family", std::string()) : std::string();
  if (name == "hot-switch") return hot_switch(plan, source);
  if (name == "per-layer") return per_layer(plan, source);
  if (name == "heterogeneous") return asymmetric(plan, source);
  JsonReader(plan.document, source).required("family_plan").required("family")
      .one_of({"hot-switch", "per-layer", "heterogeneous"}, "plan family (or no family plan: a uniform plan)");
  throw std::logic_error("unreachable");
}

}  // namespace twin
