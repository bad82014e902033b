// for_each_candidate_op: what a calibration of a scenario measures is exactly the ops of its feasible
// candidates' graphs, and nothing of the infeasible ones.
#include <gtest/gtest.h>

#include "strategies/lowering.hpp"
#include "strategies/search.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

TEST(CandidateOps, VisitsEveryOpOfEveryFeasibleCandidateOnly) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(8), 1, 2048, 16);
  scenario.search.tensor_model_parallel_size = {1, 2, 3};  // 3 divides neither heads nor the 8 GPUs
  scenario.search.pipeline_model_parallel_size = {1, 2};
  scenario.search.virtual_pipeline_model_parallel_size = {1};
  scenario.search.schedule = {Schedule::one_f_one_b};
  scenario.search.recompute = {Recompute::none};
  scenario.search.zero_stage = {1};
  scenario.search.micro_batch_size = {1};

  std::size_t expected = 0;
  int feasible = 0, infeasible = 0;
  for (const Candidate& c : enumerate_candidates(scenario)) {
    if (!c.feasible) {
      ++infeasible;
      continue;
    }
    ++feasible;
    expected += lower_to_op_graphs(scenario, c.strategy).total_ops();
  }
  ASSERT_GT(feasible, 0);
  ASSERT_GT(infeasible, 0);
  std::size_t visited = 0;
  for_each_candidate_op(scenario, [&](const Op&) { ++visited; });
  EXPECT_EQ(visited, expected);
}

}  // namespace
}  // namespace twin
