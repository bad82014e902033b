// A hot-switching plan as a candidate holds it (family "hot-switch"): its phases, shortest sequences first
// and home last, the switches into them, and what simulating it again needs; and the simulation of a plan
// whole in the engine, which makes it a candidate.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"
#include "strategies/search.hpp"

namespace twin {

struct HotSwitchPlan final : FamilyPlan {
  std::vector<SeqLengthCount> batch;    // the iteration's sequences (batch_sequences of the scenario)
  std::vector<HotSwitchPhase> phases;   // in run order; the last is home. One phase: a static-packed plan
  std::vector<SwitchPlan> switches;     // switches[p]: into phase p; none for a static plan
  MemoryEstimate memory;                // per stage, the worst phase with home's optimizer states

  std::string family() const override { return "hot-switch"; }
  // "hot-switch:<=4096:<strategy>><=32768:<strategy>", or "static-packed:<strategy>" for one phase.
  std::string key() const override;
  // "2 phases: (0,4096] <strategy> x40 | (4096,32768] <strategy> x8 (home last); 1.23 GB switched".
  std::string summary() const override;
  // {"phases": [lengths, sequences, packs, strategy, switch_in bytes], "home": <strategy key>}.
  nlohmann::json to_json() const override;
  Candidate evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                     IterationGraph* graph) const override;
};

// Tokens per second, MFU and HFU of an iteration of `iteration_s` that trains `batch` in `phases`: real tokens,
// model FLOPs per sequence of its own length (phases_throughput).
Throughput hot_switch_throughput(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                                 const std::vector<HotSwitchPhase>& phases, double iteration_s);

// A plan of several phases is lowered with a rank class per GPU and phase: the reason its graph is refused
// (strategies/validity.hpp's bound on about how many ops it holds), or nullopt within it or for one phase.
std::optional<std::string> hot_switch_too_many_ops_reason(const Scenario& scenario,
                                                           const std::vector<HotSwitchPhase>& phases);

// Simulates the plan of `phases` whole (switch transfers and per-layer waits included; one phase: the
// phase alone with its optimizer step): a feasible candidate holding a HotSwitchPlan, or an infeasible one
// with hot_switch_too_many_ops_reason, not lowered.
Candidate simulate_hot_switch_plan(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                                   const std::vector<HotSwitchPhase>& phases, const MemoryEstimate& memory,
                                   const Profile& profile, bool record_op_timings, IterationGraph* graph);

}  // namespace twin
