// Pipelined per-layer plans whose stages hold layouts of different sizes: every collective has a span of its
// group's size (the 1,024-GPU search once failed with "group_size 4 but the tensor span has size 2"), and a
// stage boundary between layouts adds no op.

#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::llama_shaped;
using testing::make_scenario;

// 2 nodes, 4 stages of 4 GPUs: tp2 | Ulysses 4 | tp2 then tp1 (data parallel) | tp4 then tp2. Stages 0
// and 2 hold no layer of group 4, yet re-lay out from or to a neighbour's group 4.
PerLayerPlan mixed_stages_plan() {
  // 4 samples per micro-batch: a tp1 layer gives each GPU one.
  return testing::per_layer_plan(4, 4, 4, {2, 2, 2, 2},
                                 {{{2, false}, 1, Recompute::none}, {{2, false}, 1, Recompute::none},
                                  {{4, true}, 1, Recompute::none},  {{4, true}, 3, Recompute::selective},
                                  {{2, false}, 1, Recompute::full}, {{1, false}, 1, Recompute::none},
                                  {{4, false}, 0, Recompute::none}, {{2, false}, 1, Recompute::none}});
}

TEST(PerLayerPipeline, EveryCollectiveOfEveryStageHasASpanOfItsSize) {
  const Scenario sc = make_scenario(llama_shaped(8), 2, 1024, 16);
  const IterationGraph graph = lower_per_layer_plan(sc, mixed_stages_plan());
  ASSERT_EQ(graph.classes.size(), 4u);
  int collectives = 0;
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.group == GroupKind::none || op.kind == OpKind::send || op.kind == OpKind::recv) continue;
      ++collectives;
      const GroupSpan* span = rc.span_of(op.group, op.group_size);
      ASSERT_NE(span, nullptr) << rc.label << " " << op_name(op) << " group_size " << op.group_size;
      EXPECT_EQ(span->size, op.group_size);
      EXPECT_EQ(span->ranks_per_node * span->nodes, op.group_size);
    }
  EXPECT_GT(collectives, 0);
  EXPECT_GT(simulate_iteration(graph, sc.cluster, builtin_profile()).iteration_ns, 0);
}

TEST(PerLayerPipeline, LayoutChangesAtStageBoundariesAddNoOp) {
  const Scenario sc = make_scenario(llama_shaped(8), 2, 1024, 16);
  const IterationGraph graph = lower_per_layer_plan(sc, mixed_stages_plan());
  // Only the Ulysses layers (2 and 3, on stage 1) have all-to-alls: their attention's.
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind == OpKind::all_to_all) EXPECT_TRUE(op.layer == 2 || op.layer == 3) << rc.label << " " << op_name(op);
    }
  // Stage 0 holds only tp2 layers: no communicator of another size.
  EXPECT_EQ(graph.classes[0].span_of(GroupKind::tensor, 4), nullptr);
}

}  // namespace
}  // namespace twin
