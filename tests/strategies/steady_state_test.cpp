// Steady-state extrapolation (strategies/steady_state.hpp): where it applies, the line through two shorter
// replays, and its result against the whole replay on every candidate of every shipped scenario it applies to.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "sim/engine.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/search.hpp"
#include "tests/strategies/shipped_scenarios.hpp"
#include "strategies/steady_state.hpp"
#include "strategies/validity.hpp"
#include "tests/strategies/steady_state_errors.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

TEST(SteadyState, EveryCandidateOfEveryShippedScenarioItAppliesToIsWithinTolerance) {
  testing::SteadyStateTotals totals;
  for (const fs::path& file : testing::shipped_scenario_files()) {
    SCOPED_TRACE(file.filename().string());
    const Scenario scenario = load_scenario(file.string());
    testing::expect_steady_state_within_tolerance(scenario, testing::profile_of(scenario, file), totals);
  }
  EXPECT_GT(totals.checked, 50);
  std::printf("%d candidates, worst iteration error %.4f%%\n", totals.checked, 100 * totals.worst);
}

Scenario small_scenario(int global_batch) {
  Scenario scenario = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-7b-8xH100.json");
  scenario.training.global_batch_size = global_batch;
  return scenario;
}

Strategy pipeline(const Scenario& scenario, int pp, Schedule schedule, int chunks = 1) {
  Strategy s;
  s.tensor_model_parallel_size = 1;
  s.pipeline_model_parallel_size = pp;
  s.virtual_pipeline_model_parallel_size = chunks;
  s.data_parallel_size = 8 / pp;
  s.micro_batch_size = 1;
  s.schedule = schedule;
  s.recompute = Recompute::full;
  if (auto reason = complete_strategy(scenario, s)) ADD_FAILURE() << *reason;
  return s;
}

TEST(SteadyState, AppliesToLongPipelinesOfTheThreePipelineSchedulesOnly) {
  const Scenario many = small_scenario(512);  // DP 2 at PP 4: 256 micro-batches
  const Strategy one_f_one_b = pipeline(many, 4, Schedule::one_f_one_b);
  ASSERT_EQ(one_f_one_b.num_micro_batches, 256);
  EXPECT_EQ(steady_state_replay(many, one_f_one_b), (SteadyStateReplay{4, 16}));
  EXPECT_EQ(steady_state_replay(many, pipeline(many, 4, Schedule::gpipe)), (SteadyStateReplay{4, 16}));
  EXPECT_EQ(steady_state_replay(many, pipeline(many, 4, Schedule::interleaved_1f1b, 2)), (SteadyStateReplay{8, 12}));
  EXPECT_EQ(steady_state_replay(many, pipeline(many, 1, Schedule::one_f_one_b)), (SteadyStateReplay{2, 8}));
  EXPECT_FALSE(steady_state_replay(many, pipeline(many, 4, Schedule::double_strand)));
  // Eight GPUs on four NICs: between nodes their flows share each NIC, the step does not settle, and the whole is
  // replayed; on one node the NICs carry nothing.
  Scenario shared_nics = many;
  shared_nics.cluster.node_groups.front().nics = {.count = 4, .bandwidth_Gbps = 400};
  EXPECT_EQ(steady_state_replay(shared_nics, one_f_one_b), (SteadyStateReplay{4, 16}));
  shared_nics.cluster.node_groups.front().count = 2;
  shared_nics.training.global_batch_size = 1024;  // DP 4 at PP 4 on 16 GPUs: 256 micro-batches again
  const Strategy across_nodes = pipeline(shared_nics, 4, Schedule::one_f_one_b);
  ASSERT_EQ(across_nodes.num_micro_batches, 256);
  EXPECT_FALSE(steady_state_replay(shared_nics, across_nodes));
  shared_nics.cluster.node_groups.front().nics.count = 8;
  EXPECT_EQ(steady_state_replay(shared_nics, across_nodes), (SteadyStateReplay{4, 16}));

  // m = 30 = 7.5 W: the two replays (W + 4W = 20 micro-batches) are 2/3 of it; one fewer and the whole is replayed.
  EXPECT_TRUE(steady_state_replay(small_scenario(60), pipeline(small_scenario(60), 4, Schedule::one_f_one_b)));
  EXPECT_FALSE(steady_state_replay(small_scenario(58), pipeline(small_scenario(58), 4, Schedule::one_f_one_b)));
  // Interleaved: 2W + 3W = 20 of m = 28 is more than 2/3; m = 32 is not.
  EXPECT_FALSE(steady_state_replay(small_scenario(56), pipeline(small_scenario(56), 4, Schedule::interleaved_1f1b, 2)));
  EXPECT_TRUE(steady_state_replay(small_scenario(64), pipeline(small_scenario(64), 4, Schedule::interleaved_1f1b, 2)));
}

IterationResult two_classes(TimeNs finish0, TimeNs finish1, TimeNs compute) {
  IterationResult r;
  for (TimeNs finish : {finish0, finish1}) {
    ClassResult c;
    c.finish_ns = finish;
    c.breakdown.compute_ns = compute;
    c.breakdown.exposed_communication_ns = 10;
    c.breakdown.optimizer_ns = 5;
    c.breakdown.bubble_ns = finish - compute - 15;
    c.communication_busy_ns = 2 * compute;
    r.classes.push_back(c);
  }
  r.events = 7;
  return r;
}

TEST(SteadyState, ExtrapolatesEveryTimeAlongTheLineAndPicksTheLatestClass) {
  // Class 0 grows 100 ns per micro-batch, class 1 150 ns: class 1 finishes last at 10 micro-batches.
  const IterationResult first = two_classes(1000, 900, 400);   // 4 micro-batches
  const IterationResult second = two_classes(1400, 1500, 600); // 8 micro-batches
  const IterationResult r = extrapolate_steady_state(first, second, SteadyStateReplay{4, 8}, 100);
  ASSERT_EQ(r.classes.size(), 2u);
  EXPECT_EQ(r.classes[0].finish_ns, 1400 + 92 * 100);
  EXPECT_EQ(r.classes[1].finish_ns, 1500 + 92 * 150);
  EXPECT_EQ(r.critical_class, 1);
  EXPECT_EQ(r.iteration_ns, r.classes[1].finish_ns);
  EXPECT_EQ(r.breakdown.compute_ns, 600 + 92 * 50);
  EXPECT_EQ(r.breakdown.exposed_communication_ns, 10);
  EXPECT_EQ(r.breakdown.optimizer_ns, 5);
  EXPECT_EQ(r.breakdown.compute_ns + r.breakdown.exposed_communication_ns + r.breakdown.bubble_ns +
                r.breakdown.optimizer_ns,
            r.iteration_ns);
  EXPECT_EQ(r.classes[0].communication_busy_ns, 1200 + 92 * 100);
  EXPECT_EQ(r.events, 14u);
  EXPECT_TRUE(r.classes[0].op_timings.empty());
}

TEST(SteadyState, AnIterationBeyondTheEnginesHorizonIsAnError) {
  const IterationResult first = two_classes(1000, 900, 400);
  const IterationResult second = two_classes(sim::kHorizonNs / 2, 1500, 600);
  EXPECT_THROW(extrapolate_steady_state(first, second, SteadyStateReplay{4, 8}, 100), std::range_error);
}

TEST(SteadyState, TheSearchRanksItsTopWholeAndOtherwiseAsTheFullReplayDoes) {
  Scenario scenario = small_scenario(512);
  SearchSpace& space = scenario.search;
  space.tensor_model_parallel_size = {1, 2};
  space.pipeline_model_parallel_size = {1, 2, 4};
  space.context_parallel_size = {1};
  space.sequence_parallel = {true};
  space.micro_batch_size = {1};
  space.zero_stage = {1};
  space.recompute = {Recompute::none, Recompute::full};
  SearchOptions full, steady;
  full.jobs = steady.jobs = 2;
  full.exhaustive = steady.exhaustive = true;
  full.full_replay = true;
  steady.whole_top = 3;
  const Profile profile = load_profile(scenario.profile);
  const std::vector<Candidate> a = search(scenario, profile, {}, full);
  const std::vector<Candidate> b = search(scenario, profile, {}, steady);
  ASSERT_EQ(a.size(), b.size());
  int extrapolated = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!b[i].feasible) continue;
    if (i < 3) {  // the top three are whole replays, the same as the full search's
      EXPECT_FALSE(b[i].result.steady_state.extrapolated());
      EXPECT_EQ(b[i].key(), a[i].key());
      EXPECT_EQ(b[i].result.iteration_ns, a[i].result.iteration_ns);
    }
    if (b[i].result.steady_state.extrapolated()) ++extrapolated;
    const auto same = std::find_if(a.begin(), a.end(), [&](const Candidate& c) { return c.key() == b[i].key(); });
    ASSERT_NE(same, a.end());
    EXPECT_NEAR(static_cast<double>(b[i].result.iteration_ns), static_cast<double>(same->result.iteration_ns),
                kSteadyStateIterationTolerance * static_cast<double>(same->result.iteration_ns))
        << b[i].key();
  }
  EXPECT_GT(extrapolated, 10);
}

}  // namespace
}  // namespace twin
