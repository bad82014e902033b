// Pipelined per-layer plans whose stages hold layouts of different sizes: the re-layout at a stage
// boundary runs over the larger of the two stages' groups, which the stage must have a span for
// (the 1,024-GPU search once failed with "group_size 4 but the tensor span has size 2").
#include <algorithm>

#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::llama_shaped;
using testing::make_scenario;

// 2 nodes, 4 stages of 4 GPUs: tp2 | Ulysses 4 | tp2 then tp1 (data parallel) | tp4 then tp2. Stages 0
// and 2 hold no layer of group 4, yet re-lay out from or to a neighbour's group 4.
PerLayerPlan mixed_stages_plan() {
  PerLayerPlan p;
  p.pipeline_stages = 4;
  p.stage_micro_batch = 4;  // a tp1 layer gives each GPU one sample
  p.num_micro_batches = 4;
  p.stage_layers = {2, 2, 2, 2};
  p.layers = {{{2, false}, 1, Recompute::none}, {{2, false}, 1, Recompute::none},
              {{4, true}, 1, Recompute::none},  {{4, true}, 3, Recompute::selective},
              {{2, false}, 1, Recompute::full}, {{1, false}, 1, Recompute::none},
              {{4, false}, 0, Recompute::none}, {{2, false}, 1, Recompute::none}};
  return p;
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

TEST(PerLayerPipeline, BoundaryRelayoutsRunOverTheLargerOfTheTwoStagesGroups) {
  const Scenario sc = make_scenario(llama_shaped(8), 2, 1024, 16);
  const IterationGraph graph = lower_per_layer_plan(sc, mixed_stages_plan());
  const std::int64_t tokens = 4 * 1024 / 4, hidden = 1024;
  // Every re-layout: (stage, layer, phase, from group, to group). A stage's forward starts in the
  // previous stage's last layout, its backward in the next stage's first layout.
  struct Expected {
    int stage, layer;
    Phase phase;
    int from, to;
  };
  const std::vector<Expected> expected = {
      {0, 1, Phase::backward, 4, 2},                                  // from stage 1's Ulysses 4
      {1, 2, Phase::forward, 2, 4},  {1, 3, Phase::backward, 2, 4},   // both boundaries
      {2, 4, Phase::forward, 4, 2},  {2, 5, Phase::forward, 2, 1},    // boundary, then inside
      {2, 5, Phase::backward, 4, 1}, {2, 4, Phase::backward, 1, 2},   // from stage 3's tp4, then inside
      {3, 6, Phase::forward, 1, 4},  {3, 7, Phase::forward, 4, 2},  {3, 6, Phase::backward, 2, 4}};
  std::vector<int> relayouts_per_stage(4, 0);
  for (const RankClass& rc : graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      const bool ulysses_layer = op.layer == 2 || op.layer == 3;
      if (op.kind == OpKind::all_to_all && !ulysses_layer) ++relayouts_per_stage[rc.stage];
    }
  for (int stage = 0; stage < 4; ++stage) {
    int n = 0;
    for (const Expected& x : expected) n += x.stage == stage;
    EXPECT_EQ(relayouts_per_stage[stage], stage == 1 ? 0 : 4 * n) << "stage " << stage;
  }
  for (const Expected& x : expected) {
    const RankClass& rc = graph.classes[x.stage];
    int found = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      const bool relayout = op.kind == OpKind::all_to_all && op.stream == Stream::tp_comm &&
                            (op.role == OpRole::tp_scatter) == (op.phase == Phase::forward) &&
                            op.bytes == relayout_bytes(tokens, hidden, x.from, x.to, 4);
      if (relayout && op.layer == x.layer && op.phase == x.phase && !op.recomputed) {
        EXPECT_EQ(op.group_size, std::max(x.from, x.to));
        ++found;
      }
    }
    EXPECT_EQ(found, 4) << "stage " << x.stage << " layer " << x.layer;  // one per micro-batch
  }
  // Stage 0 holds only tp2 layers: its size-4 tensor span exists for the boundary re-layout alone.
  const GroupSpan* four = graph.classes[0].span_of(GroupKind::tensor, 4);
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(four->ranks_per_node, 4);
  EXPECT_EQ(four->nodes, 1);
}

}  // namespace
}  // namespace twin
