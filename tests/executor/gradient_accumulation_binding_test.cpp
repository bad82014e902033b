// Weight gradients without gradient accumulation fusion (framework.gradient_accumulation_fusion false), as the
// interpreter binds them: each grad_accumulation op names its linear, the GEMM of that linear in the same layer,
// micro-batch and chunk writes apart (OpBinding::gradient_apart), and neither stores the gradient (first_gradient):
// the add runs every micro-batch, the first's too, into gradients the step zeroes (Megatron's main_grad.add_).
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include "tests/executor/op_binding_fixtures.hpp"

namespace twin::exec {
namespace {

using testing_binding::lower;

Scenario unfused_accumulation() {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
  scenario.framework.gradient_accumulation_fusion = false;
  return scenario;
}

TEST(GradientAccumulationBinding, EachLinearsGemmWritesApartAndItsAddAlwaysAdds) {
  Strategy strategy = testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b);
  for (const RankClass& rc : lower(strategy, unfused_accumulation()).classes) {
    const std::vector<OpBinding> bindings = bind_ops(rc);
    using Key = std::tuple<std::int32_t, OpRole, std::int32_t>;  // layer, linear, micro-batch
    std::map<Key, int> apart, adds;
    int norm_stores = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      const OpBinding& b = bindings[i];
      norm_stores += b.action == Action::norm_backward && b.first_gradient;
      if (b.action == Action::linear_weight_grad) {
        EXPECT_TRUE(b.gradient_apart) << op_name(op);  // every dense linear's has its add
        EXPECT_FALSE(b.first_gradient) << op_name(op);
        ++apart[{op.layer, b.subject, op.micro_batch}];
      }
      if (b.action != Action::grad_accumulation) continue;
      EXPECT_EQ(b.subject, op.linear) << op_name(op);
      EXPECT_FALSE(b.first_gradient) << op_name(op);
      EXPECT_TRUE(gradient_key(op, b, false).has_value()) << op_name(op);  // it writes, but never stores
      ++adds[{op.layer, b.subject, op.micro_batch}];
    }
    ASSERT_FALSE(apart.empty());
    EXPECT_EQ(apart, adds);  // one add for each GEMM written apart, every micro-batch
    EXPECT_GT(norm_stores, 0);  // the norms' weights still store their first gradient
  }
}

// Tied embeddings: the output projection's add apart comes first in the backward and adds into the table's gradient;
// the embedding backward after it must add too, not store (a store zeroes the table and would drop the add).
TEST(GradientAccumulationBinding, ATiedTablesEmbeddingBackwardAddsAfterTheOutputLayersAdd) {
  Scenario scenario = unfused_accumulation();
  scenario.cluster.node_groups[0].gpus_per_node = 1;
  scenario.model.untie_embeddings_and_output_weights = false;
  const IterationGraph graph = lower(testing::make_strategy(1, 1, 1, false), scenario);
  for (bool tied : {true, false}) {
    int embedding_stores = 0, embedding_backwards = 0;
    for (const OpBinding& b : bind_ops(graph.classes[0], tied)) {
      embedding_stores += b.action == Action::embedding_backward && b.first_gradient;
      embedding_backwards += b.action == Action::embedding_backward;
    }
    EXPECT_GT(embedding_backwards, 1) << tied;
    EXPECT_EQ(embedding_stores, tied ? 0 : 1) << tied;
  }
}

TEST(GradientAccumulationBinding, WithFusionNoGemmWritesApart) {
  for (const RankClass& rc : lower(testing::make_strategy(1, 1, 1, false)).classes)
    for (const OpBinding& b : bind_ops(rc)) {
      EXPECT_FALSE(b.gradient_apart);
      EXPECT_NE(b.action, Action::grad_accumulation);
    }
}

// An add that names no GEMM before it (its linear's, in its layer and micro-batch) is refused by name.
TEST(GradientAccumulationBinding, RefusesAnAddWithoutItsGemm) {
  RankClass rc;
  Op add;
  add.kind = OpKind::elementwise;
  add.role = OpRole::grad_accumulation;
  add.phase = Phase::backward;
  add.linear = OpRole::fc1;
  add.layer = 0;
  add.micro_batch = 0;
  add.bytes = 6 * 64;
  rc.add(add);
  try {
    bind_ops(rc);
    ADD_FAILURE() << "an accumulation without its GEMM was bound";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no weight-gradient GEMM of its linear before it"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace twin::exec
