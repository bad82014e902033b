// The lowered graphs replay in the real engine: every strategy shape finishes (no transfer waits
// forever), and the pipeline's stages all finish within the iteration.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

TEST(LoweringSimulation, EveryShapeCompletesInTheEngine) {
  const Scenario sc = testing::make_scenario(testing::moe_shaped(), 2, 1024, 32);
  std::vector<Strategy> cases = {testing::make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b),
                                 testing::make_strategy(2, 2, 2), testing::make_strategy(1, 4, 1, false, 1, Schedule::gpipe)};
  cases[1].zero_stage = 3;
  cases[1].recompute = Recompute::full;
  cases[2].zero_stage = 1;
  cases[2].expert_model_parallel_size = 4;
  for (Strategy st : cases) {
    ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
    ASSERT_EQ(invalid_reason(sc, st), std::nullopt) << st.key();
    const IterationGraph g = lower_to_op_graphs(sc, st);
    const IterationResult r = simulate_iteration(g, sc.cluster, builtin_profile());
    EXPECT_GT(r.iteration_ns, 0) << st.key();
    ASSERT_EQ(r.classes.size(), g.classes.size());
    for (const ClassResult& c : r.classes) EXPECT_LE(c.finish_ns, r.iteration_ns);
  }
}

}  // namespace
}  // namespace twin
