// The framework lowering tests' helpers: a scenario and strategy lowered (completed, valid, well formed) on an H100,
// ops counted, and the iteration the engine replays with the built-in profile.
#pragma once
#include <functional>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin::testing_framework {

struct FrameworkLowered {
  Scenario scenario;
  Strategy strategy;
  IterationGraph graph;
};

inline FrameworkLowered lower_with_framework(Scenario scenario, Strategy strategy) {
  scenario.cluster.node_groups[0].gpu = *gpu_preset("H100-SXM-80GB");  // the fixture's GPU has no HBM figure
  EXPECT_EQ(complete_strategy(scenario, strategy), std::nullopt);
  EXPECT_EQ(invalid_reason(scenario, strategy), std::nullopt) << strategy.key();
  IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  check_well_formed(graph);
  return {scenario, strategy, std::move(graph)};
}

inline int count(const IterationGraph& g, const std::function<bool(const Op&)>& wanted) {
  int n = 0;
  for (const RankClass& rc : g.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) n += wanted(rc.op(i)) ? 1 : 0;
  return n;
}

inline TimeNs iteration_ns(const FrameworkLowered& l) {
  return simulate_iteration(l.graph, l.scenario.cluster, builtin_profile()).iteration_ns;
}

}  // namespace twin::testing_framework
