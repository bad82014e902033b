// Tied embeddings with a pipeline: the first and the last stage both hold the word embedding and
// all-reduce its gradient over Megatron's embedding group (those two ranks), not the pipeline group.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "strategies/lowering.hpp"
#include "strategies/search.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

TEST(TiedEmbeddingPipeline, FirstAndLastStageSyncOverTheEmbeddingGroupAndItSimulates) {
  ModelConfig gpt = testing::gpt_shaped();
  ASSERT_FALSE(gpt.untie_embeddings_and_output_weights);
  for (int pp : {2, 4}) {
    Scenario scenario = testing::make_scenario(gpt, 1, 2048, 16);
    Strategy strategy = testing::make_strategy(2, pp);
    ASSERT_FALSE(complete_strategy(scenario, strategy).has_value());
    ASSERT_FALSE(invalid_reason(scenario, strategy).has_value());
    IterationGraph graph = lower_to_op_graphs(scenario, strategy);
    for (const RankClass& rc : graph.classes) {
      int syncs = 0;
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (rc.op(i).role == OpRole::embedding_grad_sync) {
          ++syncs;
          EXPECT_EQ(rc.op(i).group, GroupKind::embedding);
          EXPECT_EQ(rc.op(i).group_size, 2);
        }
      EXPECT_EQ(syncs, rc.stage == 0 || rc.stage == pp - 1 ? 1 : 0) << "stage " << rc.stage;
      EXPECT_EQ(rc.spans[static_cast<int>(GroupKind::embedding)].size, 2);
    }
    Candidate c = evaluate(scenario, builtin_profile(), strategy, false);
    EXPECT_GT(c.result.iteration_ns, 0) << "pp " << pp;
  }
}

}  // namespace
}  // namespace twin
