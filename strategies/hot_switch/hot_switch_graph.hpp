// The hot-switching iteration as one set of op graphs for the event engine: every phase (a length bucket
// run with its own strategy) gets one rank class per GPU, so that the switch into it is the real point-to-
// point transfers between GPUs, on their links, with each layer's first compute waiting only for that
// layer's weights. A GPU's classes run one after another (a zero-byte handoff orders them); gradients
// accumulated in a previous layout that differs arrive before the phase's first backward op of their unit
// (plan_switch: the value its gradients start from); only the last (home) phase keeps the optimizer step.
#pragma once
#include <vector>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "sim/result.hpp"
#include "strategies/hot_switch/hot_switch_resharding.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"

namespace twin {

struct HotSwitchPhase {
  Strategy strategy;        // complete and valid for phase_scenario(scenario, workload, packs)
  PhaseWorkload workload;
  std::int64_t packs = 0;   // padded_packs(workload, strategy)
};

// The phase's op graphs as the uniform lowering makes them (one class per stage), attention scaled to the
// packs' varlen work, and without the optimizer step unless `keep_optimizer`.
IterationGraph lower_phase(const Scenario& scenario, const HotSwitchPhase& phase, const Profile& profile,
                           bool keep_optimizer);

struct HotSwitchIteration {
  IterationGraph graph;              // classes phase-major: phase * world + rank
  std::vector<SwitchPlan> switches;  // switches[p]: into phase p (phase 0 from the home layout, weights only)
};
// `phases` in run order, the last one is home (its layout holds the optimizer states).
HotSwitchIteration build_hot_switch_iteration(const Scenario& scenario, const std::vector<HotSwitchPhase>& phases,
                                              const Profile& profile);

// The switch alone (transfers on one class per GPU, nothing else): what it costs without overlap.
IterationGraph switch_only_graph(const Scenario& scenario, const SwitchPlan& plan, const Strategy& to);

// The engine's result of a build_hot_switch_iteration graph, with the breakdown of the critical GPU summed
// over its phases (each phase class counts its wait for the previous phase as bubble; summed it is not).
IterationResult fold_phase_classes(IterationResult result, int world, int phases);

}  // namespace twin
