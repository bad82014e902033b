// Hot switching: HotSPa's packing and the batch's lengths, the boundary choice on costs worked out by
// hand, and in the engine on the shipped long-tailed scenario: hot switching beats the best static
// strategy that fits the longest sequence, and the per-layer waits hide part of the switch.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/hot_switch/hot_switch_search.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin {
namespace {

const std::string kScenario = std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100-hot-switch.json";

// The batch's counts are the largest-remainder rounding (ties to the shorter length) however many bars: the
// heap that picks the remainders gives what sorting them all gave.
TEST(HotSwitchWorkload, LargestRemaindersOfManyBarsAsSortingThemAll) {
  std::uint64_t state = 44;
  const auto next = [&](std::uint64_t range) {  // a fixed pseudo-random sequence (PCG's multiplier)
    state = state * 6364136223846793005u + 1442695040888963407u;
    return (state >> 33) % range;
  };
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<SeqLengthCount> bars;
    for (std::int64_t length = 1; length <= 3000; ++length)
      if (next(4) != 0) bars.push_back({length, static_cast<std::int64_t>(next(5) * (1 + trial % 3))});
    bars.push_back({3001, 1});
    Scenario s = testing::make_scenario(testing::llama_shaped(4), 1, 4096, 1 + static_cast<int>(next(700)));
    s.training.seq_length_histogram = bars;
    // The reference: every remainder sorted, stably, largest first.
    double sum = 0;
    for (const SeqLengthCount& bar : bars) sum += static_cast<double>(bar.count);
    std::vector<std::int64_t> counts;
    std::vector<std::pair<double, std::size_t>> remainders;
    std::int64_t given = 0;
    for (std::size_t i = 0; i < bars.size(); ++i) {
      const double exact = static_cast<double>(bars[i].count) / sum * static_cast<double>(s.training.global_batch_size);
      counts.push_back(static_cast<std::int64_t>(std::floor(exact)));
      given += counts.back();
      remainders.push_back({exact - std::floor(exact), i});
    }
    std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (std::size_t k = 0; given < s.training.global_batch_size && k < remainders.size(); ++k, ++given)
      ++counts[remainders[k].second];
    std::vector<SeqLengthCount> expected;
    for (std::size_t i = 0; i < bars.size(); ++i)
      if (counts[i] > 0) expected.push_back({bars[i].length, counts[i]});
    EXPECT_EQ(batch_sequences(s), expected) << "trial " << trial;
  }
}

TEST(HotSwitchWorkload, GreedyPackingTakesTheLongestThenFillsWithTheShortest) {
  // 5+1, 4+2, 3: three packs of 6; capacity 10: 5+1+2 (3 no longer fits), 4+3: two packs.
  EXPECT_EQ(greedy_pack_count({1, 2, 3, 4, 5}, 6), 3);
  EXPECT_EQ(greedy_pack_count({1, 2, 3, 4, 5}, 10), 2);
  EXPECT_EQ(greedy_pack_count({}, 10), 0);
}

TEST(HotSwitchWorkload, HistogramScaledToTheBatchByLargestRemainders) {
  Scenario s = testing::make_scenario(testing::llama_shaped(4), 1, 4096, 5);
  s.training.seq_length_histogram = {{1024, 1}, {2048, 1}, {4096, 2}};  // exact 1.25, 1.25, 2.5
  const std::vector<SeqLengthCount> expected = {{1024, 1}, {2048, 1}, {4096, 3}};
  EXPECT_EQ(batch_sequences(s), expected);
  const PhaseWorkload w = pack_range(expected, 1024, 4096);  // 2048 + 3 x 4096
  EXPECT_EQ(w.sequences, 4);
  EXPECT_EQ(w.tokens, 2048 + 3 * 4096);
  EXPECT_EQ(w.packs, 4);
  EXPECT_DOUBLE_EQ(w.squared_lengths, 2048.0 * 2048 + 3.0 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(attention_scale(w, 4), w.squared_lengths / (4.0 * 4096 * 4096));
  // Boundaries: powers of two from the shortest length, each with sequences below it, and the longest.
  const std::vector<std::int64_t> ends = {1024, 2048, 4096};
  EXPECT_EQ(candidate_boundaries(s, expected), ends);
}

// Two strategies over 3 boundaries. Strategy 0 ("wide DP") runs 1 ns per unit of length but fits only up to
// position 1; strategy 1 fits everything at 10 ns per unit; every phase adds 1 ns. Switches between two
// layouts cost 2 (weights) and 3 (with gradients), 0.5 between equal ones; the optimizer 1. With home 1:
//   s0 (0,1], s1 (1,3]:        2 + 2 (home -> s0) + 3 (s0 -> home) + 21 + 1 = 29
//   s0 (0,1], s1 (1,2], (2,3]: 2 + 2 + 3 + 11 + 0.5 + 11 + 1              = 30.5
//   s1 (0,1], s1 (1,3]:        11 + 0.5 + 0.5 + 21 + 1                    = 34
TEST(HotSwitchBoundaries, DynamicProgramPicksTheCheapestChainForAHome) {
  BoundaryCosts costs;
  costs.ends = 3;
  costs.strategies = 2;
  costs.phase_ns = [](int a, int c, int s) { return static_cast<double>((c - a) * (s == 0 ? 1 : 10) + 1); };
  costs.fits = [](int, int c, int s, int) { return s == 1 || c <= 1; };
  costs.switch_ns = [](int from, int to, bool gradients) { return from == to ? 0.5 : gradients ? 3.0 : 2.0; };
  costs.optimizer_ns = [](int) { return 1.0; };
  BoundaryChoice choice = choose_boundaries(costs, 1);
  EXPECT_EQ(choice.ends, (std::vector<int>{1, 3}));
  EXPECT_EQ(choice.strategies, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(choice.estimate_ns, 29.0);
  // Expensive switches between different layouts: home keeps two phases of itself, 11 + 21 + 1 + 1 = 34.
  costs.switch_ns = [](int from, int to, bool) { return from == to ? 0.5 : 100.0; };
  choice = choose_boundaries(costs, 1);
  EXPECT_EQ(choice.strategies, (std::vector<int>{1, 1}));
  EXPECT_DOUBLE_EQ(choice.estimate_ns, 34.0);
  // Home 0 cannot hold the longest sequences: no plan.
  EXPECT_TRUE(choose_boundaries(costs, 0).ends.empty());
}

const Candidate* best_of(const std::vector<Candidate>& candidates, bool switching) {
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates) {
    const bool is_switching = c.plan_as<HotSwitchPlan>()->phases.size() > 1;
    if (c.feasible && is_switching == switching && (!best || c.result.iteration_ns < best->result.iteration_ns))
      best = &c;
  }
  return best;
}

TEST(HotSwitchSearch, BeatsTheBestStaticStrategyOnALongTailedDistribution) {
  const Scenario scenario = load_scenario(kScenario);
  const std::vector<Candidate> candidates = search_hot_switch(scenario, builtin_profile(), 2);
  const Candidate* hot = best_of(candidates, true);
  const Candidate* fixed = best_of(candidates, false);
  ASSERT_NE(hot, nullptr);
  ASSERT_NE(fixed, nullptr);
  EXPECT_LT(hot->result.iteration_ns, fixed->result.iteration_ns)
      << hot->key() << " vs " << fixed->key();
  // The same tokens are trained either way.
  EXPECT_NEAR(hot->throughput.tokens_per_s * hot->throughput.iteration_s,
              fixed->throughput.tokens_per_s * fixed->throughput.iteration_s, 1.0);
  // The short phase runs a wider data-parallel layout than home.
  const std::vector<HotSwitchPhase>& phases = hot->plan_as<HotSwitchPlan>()->phases;
  EXPECT_GT(phases.front().strategy.data_parallel_size, phases.back().strategy.data_parallel_size);
  // Rerunning the plan gives the same result (the report and traces use it).
  IterationGraph graph;
  const Candidate again = hot->plan->evaluate(scenario, builtin_profile(), true, &graph);
  EXPECT_EQ(again.result.iteration_ns, hot->result.iteration_ns);
  EXPECT_EQ(graph.classes.size(), phases.size() * 8);
}

// Each layer of the next phase waits for its own weights only: the whole iteration takes less than its
// phases run alone plus every switch run alone, and more than the phases alone.
TEST(HotSwitchSearch, PerLayerWaitsOverlapTheSwitchWithCompute) {
  const Scenario scenario = load_scenario(kScenario);
  const std::vector<SeqLengthCount> batch = batch_sequences(scenario);
  std::vector<HotSwitchPhase> phases(2);
  const auto make = [&](HotSwitchPhase& phase, int tp, std::int64_t from, std::int64_t to, Recompute rc) {
    phase.strategy = testing::make_strategy(tp, 1);
    phase.strategy.data_parallel_size = 8 / tp;
    phase.strategy.zero_stage = 1;
    phase.strategy.recompute = rc;
    phase.workload = pack_range(batch, from, to);
    phase.packs = padded_packs(phase.workload, phase.strategy);
    phase.strategy.num_micro_batches = static_cast<int>(phase.packs / phase.strategy.data_parallel_size);
    if (tp == 1) phase.strategy.sequence_parallel = false;
  };
  make(phases[0], 1, 0, 4096, Recompute::none);
  make(phases[1], 4, 4096, 32768, Recompute::none);
  const Profile& profile = builtin_profile();
  const HotSwitchIteration iteration = build_hot_switch_iteration(scenario, phases, profile);
  const TimeNs whole = fold_phase_classes(simulate_iteration(iteration.graph, scenario.cluster, profile), 8, 2).iteration_ns;
  TimeNs phases_alone = 0, switches_alone = 0;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    phases_alone += simulate_iteration(lower_phase(scenario, phases[p], profile, p + 1 == phases.size()),
                                       scenario.cluster, profile).iteration_ns;
    ASSERT_FALSE(iteration.switches[p].transfers.empty());
    switches_alone += simulate_iteration(switch_only_graph(scenario, iteration.switches[p], phases[p].strategy),
                                         scenario.cluster, profile).iteration_ns;
  }
  EXPECT_GT(whole, phases_alone);
  EXPECT_LT(whole, phases_alone + switches_alone);
  // Into phase 0 only weights move (the step has just run); into home, weights and gradients.
  for (const SwitchTransfer& t : iteration.switches[0].transfers) EXPECT_FALSE(t.gradient);
  bool gradients = false;
  for (const SwitchTransfer& t : iteration.switches[1].transfers) gradients |= t.gradient;
  EXPECT_TRUE(gradients);
}

}  // namespace
}  // namespace twin
