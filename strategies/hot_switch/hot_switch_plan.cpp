// The plan's names and JSON from its phases and switches, and its simulation: one phase alone, or every
// phase with the switches between them in one graph whose per-phase classes are folded back per GPU.
#include "strategies/hot_switch/hot_switch_plan.hpp"

#include <fmt/format.h>

#include "sim/simulate.hpp"
#include "strategies/validity.hpp"

namespace twin {

std::string HotSwitchPlan::key() const {
  if (phases.size() == 1) return "static-packed:" + phases.front().strategy.key();
  std::string key = "hot-switch:";
  for (std::size_t p = 0; p < phases.size(); ++p)
    key += fmt::format("{}<={}:{}", p ? ">" : "", phases[p].workload.max_length, phases[p].strategy.key());
  return key;
}

std::string HotSwitchPlan::summary() const {
  if (phases.size() == 1)
    return fmt::format("static {}: {} sequences packed into {} packs of {} tokens (no switching)",
                       phases[0].strategy.key(), phases[0].workload.sequences, phases[0].packs,
                       phases[0].workload.max_length);
  std::string text = fmt::format("{} phases:", phases.size());
  Bytes switched = 0;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    text += fmt::format(" {}({},{}] {} x{}", p ? "| " : "", phases[p].workload.min_exclusive,
                        phases[p].workload.max_length, phases[p].strategy.key(), phases[p].packs);
    if (p < switches.size()) switched += switches[p].total_bytes();
  }
  return text + fmt::format(" (home last); {:.2f} GB switched", static_cast<double>(switched) / 1e9);
}

nlohmann::json HotSwitchPlan::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t p = 0; p < phases.size(); ++p) {
    const HotSwitchPhase& phase = phases[p];
    nlohmann::json entry = {{"min_length_exclusive", phase.workload.min_exclusive},
                            {"max_length", phase.workload.max_length},
                            {"sequences", phase.workload.sequences},
                            {"tokens", phase.workload.tokens},
                            {"packs", phase.workload.packs},
                            {"padded_packs", phase.packs},
                            {"strategy", phase.strategy.key()},
                            {"strategy_fields", twin::to_json(phase.strategy)}};
    if (p < switches.size() && phases.size() > 1) {
      const SwitchPlan& s = switches[p];
      entry["switch_in"] = {{"gradients", p > 0},
                            {"transfers", s.transfers.size()},
                            {"intra_node_bytes", s.intra_node_bytes},
                            {"inter_node_bytes", s.inter_node_bytes},
                            {"max_received_bytes_per_gpu", s.max_received_bytes()}};
    }
    list.push_back(std::move(entry));
  }
  return {{"phases", std::move(list)}, {"home", phases.back().strategy.key()}};
}

Throughput hot_switch_throughput(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                                 const std::vector<HotSwitchPhase>& phases, double iteration_s) {
  std::vector<PhaseWorkload> workloads;
  std::vector<Strategy> strategies;
  for (const HotSwitchPhase& phase : phases) {
    workloads.push_back(phase.workload);
    strategies.push_back(phase.strategy);
  }
  return phases_throughput(scenario, batch, workloads, strategies, iteration_s);
}

std::optional<std::string> hot_switch_too_many_ops_reason(const Scenario& scenario,
                                                           const std::vector<HotSwitchPhase>& phases) {
  if (phases.size() == 1) return std::nullopt;  // one phase is lowered as the uniform strategy, bounded as one
  double ops = 0;
  for (const HotSwitchPhase& phase : phases) {
    const double gpus_per_stage =
        static_cast<double>(scenario.cluster.total_gpus()) / phase.strategy.pipeline_model_parallel_size;
    ops += gpus_per_stage * static_cast<double>(estimated_op_count(scenario, phase.strategy));
  }
  if (ops <= static_cast<double>(kMaxOpsPerCandidate)) return std::nullopt;
  return fmt::format("its op graph would hold about {:.1f} M ops (a class per GPU and phase: {} phases on {} GPUs), "
                     "more than the limit of {} M: a larger micro_batch_size, a smaller global batch or fewer "
                     "length buckets",
                     ops / 1e6, phases.size(), scenario.cluster.total_gpus(), kMaxOpsPerCandidate / 1000000);
}

Candidate simulate_hot_switch_plan(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                                   const std::vector<HotSwitchPhase>& phases, const MemoryEstimate& memory,
                                   const Profile& profile, bool record_op_timings, IterationGraph* graph_out) {
  Candidate candidate;
  candidate.strategy = phases.back().strategy;
  candidate.memory = memory;
  auto plan = std::make_shared<HotSwitchPlan>();
  plan->batch = batch;
  plan->phases = phases;
  plan->memory = memory;
  if (auto too_many = hot_switch_too_many_ops_reason(scenario, phases)) {
    candidate.infeasible_reason = *too_many;
    candidate.plan = std::move(plan);
    return candidate;
  }
  candidate.feasible = true;
  IterationGraph graph;
  const SimOptions options{record_op_timings};
  if (phases.size() == 1) {
    graph = lower_phase(scenario, phases[0], profile, true);
    candidate.result = simulate_iteration(graph, scenario.cluster, profile, options);
  } else {
    HotSwitchIteration iteration = build_hot_switch_iteration(scenario, phases, profile);
    candidate.result = fold_phase_classes(simulate_iteration(iteration.graph, scenario.cluster, profile, options),
                                          scenario.cluster.total_gpus(), static_cast<int>(phases.size()));
    graph = std::move(iteration.graph);
    plan->switches = std::move(iteration.switches);
  }
  candidate.throughput = hot_switch_throughput(scenario, batch, phases, to_seconds(candidate.result.iteration_ns));
  candidate.plan = std::move(plan);
  if (graph_out) *graph_out = std::move(graph);
  return candidate;
}

Candidate HotSwitchPlan::evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                                  IterationGraph* graph) const {
  return simulate_hot_switch_plan(scenario, batch, phases, memory, profile, record_op_timings, graph);
}

}  // namespace twin
