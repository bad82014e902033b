// A uniform plan lowers its strategy; a hot-switching plan rebuilds its phases from the file and the
// iteration graph from them (strategies/hot_switch/), whose classes are phase-major: phase * world + rank.
#include "strategies/families/plan_graphs.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "cost/profile.hpp"
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
  PlanPart part = per_layer_part(plan.scenario, layers, plan.strategy);
  part.class_of_rank = classes_by_stage(out.graph, plan.strategy, static_cast<int>(plan.strategy.world_size()));
  out.parts.push_back(std::move(part));
  out.per_layer = std::move(layers);
  return out;
}

}  // namespace

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
  return phases.empty() ? "uniform" : "hot-switch";
}

std::int64_t PlanGraphs::tokens_per_step() const {
  std::int64_t tokens = 0;
  for (const PlanPart& part : parts) tokens += part.tokens();
  return tokens;
}

Throughput PlanGraphs::throughput(double iteration_s) const {
  if (per_layer) return per_layer_throughput(scenario, *per_layer, parts.front().strategy, iteration_s);
  if (phases.empty()) return twin::throughput(parts.front().scenario, parts.front().strategy, iteration_s);
  return hot_switch_throughput(scenario, batch_sequences(scenario), phases, iteration_s);
}

PlanGraphs plan_graphs(const Plan& plan, const std::string& source) {
  const auto family = plan.document.find("family_plan");
  if (family == plan.document.end() || family->is_null()) return uniform(plan);
  const std::string name = family->is_object() ? family->value("family", std::string()) : std::string();
  if (name == "hot-switch") return hot_switch(plan, source);
  if (name == "per-layer") return per_layer(plan, source);
  throw InputError(source, "/family_plan/family",
                   fmt::format("\"hot-switch\", \"per-layer\" or no family plan (a uniform plan): {} plans are "
                               "simulated only so far, not run or read back",
                               name.empty() ? std::string("these") : "\"" + name + "\""));
}

}  // namespace twin
