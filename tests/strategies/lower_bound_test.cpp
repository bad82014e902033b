// The search's lower bound (strategies/lower_bound.hpp) on every shipped scenario: scaling one small lowering
// gives the sum over the whole graph, and no simulation comes in under it. And the pruned search ranks its
// top candidates exactly as the exhaustive one does; GPipe and 1F1B of otherwise equal strategies share a bound.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "strategies/families/families.hpp"
#include "strategies/lower_bound.hpp"
#include "strategies/search.hpp"
#include "tests/strategies/shipped_scenarios.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

TEST(LowerBound, ScaledEqualsTheWholeGraphAndNoSimulationBeatsIt) {
  int checked = 0, scaled = 0, below_depth = 0, interleaved = 0, shared = 0;
  for (const fs::path& file : testing::shipped_scenario_files()) {
    SCOPED_TRACE(file.filename().string());
    const Scenario scenario = load_scenario(file.string());
    const Profile profile = testing::profile_of(scenario, file);
    for (const Strategy& strategy : testing::spread_candidates(scenario, 12)) {
      const TimeNs whole = compute_lower_bound_full_ns(scenario, strategy, profile);
      const TimeNs bound = compute_lower_bound_ns(scenario, strategy, profile);
      const TimeNs simulated = evaluate(scenario, profile, strategy, false).result.iteration_ns;
      EXPECT_EQ(bound, whole) << strategy.key();
      EXPECT_GT(bound, 0) << strategy.key();
      EXPECT_LE(bound, simulated) << strategy.key();
      ++checked;
      if (strategy.num_micro_batches > std::max(1, strategy.pipeline_model_parallel_size)) ++scaled;
      // Pipelines are lowered at one micro-batch, fewer than their stages (interleaved ones in GPipe's order).
      if (strategy.pipeline_model_parallel_size > 1) ++below_depth;
      if (strategy.schedule == Schedule::interleaved_1f1b) ++interleaved;
      // A search bounds GPipe and 1F1B of otherwise equal strategies once (lower_bound_strategy).
      if ((strategy.schedule == Schedule::gpipe || strategy.schedule == Schedule::one_f_one_b) &&
          strategy.num_micro_batches > 1) {
        Strategy other = strategy;
        other.schedule = strategy.schedule == Schedule::gpipe ? Schedule::one_f_one_b : Schedule::gpipe;
        EXPECT_EQ(lower_bound_strategy(strategy), lower_bound_strategy(other));
        EXPECT_EQ(compute_lower_bound_ns(scenario, other, profile), bound) << strategy.key();
        ++shared;
      }
    }
  }
  EXPECT_GT(checked, 80);
  EXPECT_GT(scaled, 20);       // the scaling itself was exercised, not only the whole-graph fallback
  EXPECT_GT(below_depth, 20);
  EXPECT_GT(interleaved, 10);
  EXPECT_GT(shared, 20);
}

void expect_same_top(const std::vector<Candidate>& pruned, const std::vector<Candidate>& exhaustive, int top) {
  ASSERT_EQ(pruned.size(), exhaustive.size());
  for (int k = 0; k < top && exhaustive[k].feasible; ++k) {
    EXPECT_EQ(pruned[k].key(), exhaustive[k].key()) << "rank " << k + 1;
    EXPECT_EQ(pruned[k].result.iteration_ns, exhaustive[k].result.iteration_ns) << exhaustive[k].key();
  }
}

TEST(PrunedSearch, RanksTheTopAsTheExhaustiveSearchDoesAndSkipsOnlySlowerCandidates) {
  for (const char* name : {"llama2-7b-8xH100", "llama2-13b-8xH100-double-strand", "mixtral-8x7b-64xH100"}) {
    SCOPED_TRACE(name);
    const Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/" + name + ".json");
    const Profile profile = load_profile(scenario.profile);
    SearchOptions exhaustive_options;
    exhaustive_options.jobs = 2;
    exhaustive_options.exhaustive = true;
    const std::vector<Candidate> exhaustive = search(scenario, profile, plan_families(), exhaustive_options);
    SearchOptions two_threads, one_thread;
    two_threads.jobs = 2;
    one_thread.jobs = 1;
    const std::vector<Candidate> pruned = search(scenario, profile, plan_families(), two_threads);
    const std::vector<Candidate> pruned_one_thread = search(scenario, profile, plan_families(), one_thread);
    expect_same_top(pruned, exhaustive, kExactTop);
    ASSERT_EQ(pruned.size(), pruned_one_thread.size());
    for (std::size_t i = 0; i < pruned.size(); ++i) {  // what is pruned does not depend on the threads
      EXPECT_EQ(pruned[i].key(), pruned_one_thread[i].key());
      EXPECT_EQ(pruned[i].pruned, pruned_one_thread[i].pruned);
    }
    const auto feasible =
        std::count_if(exhaustive.begin(), exhaustive.end(), [](const Candidate& c) { return c.feasible; });
    TimeNs tenth = 0;
    for (int k = 0; k < std::min<int>(kExactTop, feasible); ++k) tenth = exhaustive[k].result.iteration_ns;
    int skipped = 0;
    for (const Candidate& c : pruned) {
      if (!c.pruned) continue;
      ++skipped;
      EXPECT_FALSE(c.feasible);
      EXPECT_NE(c.infeasible_reason.find("not simulated"), std::string::npos);
      const auto same =
          std::find_if(exhaustive.begin(), exhaustive.end(), [&](const Candidate& e) { return e.key() == c.key(); });
      ASSERT_NE(same, exhaustive.end());
      EXPECT_TRUE(same->feasible);
      EXPECT_GE(same->result.iteration_ns, tenth) << c.key();   // it could not have ranked in the top 10
      EXPECT_GE(same->result.iteration_ns, c.lower_bound_ns) << c.key();
    }
    if (std::string(name) == "llama2-7b-8xH100") {
      EXPECT_GT(skipped, 300);  // 632 of 704 on 2026-11-25
    }
  }
}

// Pruned candidates count as done as soon as a round's results prune them: the progress holds one total, moves
// forward only and ends at it (the line jumped from about 10% to 100%, its total shrunk to the simulated ones).
TEST(PrunedSearch, ProgressCountsPrunedCandidatesAsDone) {
  const Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100.json");
  const Profile profile = load_profile(scenario.profile);
  std::vector<std::pair<int, int>> calls;
  SearchOptions options;
  options.jobs = 1;
  options.progress = [&](int done, int total) { calls.emplace_back(done, total); };
  const std::vector<Candidate> ranked = search(scenario, profile, plan_families(), options);
  const auto pruned = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.pruned; });
  ASSERT_GT(pruned, 300);
  ASSERT_FALSE(calls.empty());
  const int total = calls.front().second;
  int before = 0;
  for (const auto& [done, call_total] : calls) {
    EXPECT_EQ(call_total, total);
    EXPECT_GE(done, before);
    before = done;
  }
  const auto searched = std::count_if(ranked.begin(), ranked.end(),
                                      [](const Candidate& c) { return !c.plan && (c.feasible || c.pruned); });
  EXPECT_EQ(total, searched);  // every uniform candidate simulated or pruned
  EXPECT_EQ(calls.back().first, total);
}

}  // namespace
}  // namespace twin
