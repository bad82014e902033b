// Double strand end to end: the W-shaped schedule, the folded layout, the lowering's two strands and
// shared p2p, the memory walk, and on the shipped scenario the mechanism itself: TP communication that
// 1F1B exposes is hidden, for every tp/pp/mbs the scenario allows.
#include <map>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/schedule.hpp"
#include "strategies/search.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::make_scenario;
using testing::make_strategy;

TEST(DoubleStrand, UnitsCarryAForwardAndTheBackwardPipelineDepthEarlier) {
  // pp 2, m 3: units 0..4; unit u: forward of u (u < 3), backward of u - 2 (u >= 2). Stage 0 warms up with
  // one down pass (1F1B over units), stage 1 alternates.
  const auto orders = double_strand_schedule(2, 3);
  const std::vector<StrandStep> stage0 = {{0, true, 0, -1}, {1, true, 1, -1}, {0, false, 0, -1}, {2, true, 2, 0},
                                          {1, false, 1, -1}, {3, true, -1, 1}, {2, false, 2, 0}, {4, true, -1, 2},
                                          {3, false, -1, 1}, {4, false, -1, 2}};
  EXPECT_EQ(orders[0], stage0);
  EXPECT_EQ(orders[1].front(), (StrandStep{0, true, 0, -1}));
  EXPECT_EQ(orders[1][1], (StrandStep{0, false, 0, -1}));
  // Without pipelines the strands alternate: F0; F1 beside B0; B1.
  const auto single = double_strand_schedule(1, 2)[0];
  ASSERT_EQ(single.size(), 6u);
  EXPECT_EQ(single[2], (StrandStep{1, true, 1, 0}));
  EXPECT_EQ(single[5], (StrandStep{2, false, -1, 1}));
  // Flattened, every (micro-batch, chunk) runs once forward and once backward on each stage.
  for (const auto& order : pipeline_schedule(Schedule::double_strand, 2, 3, 1)) {
    std::map<std::tuple<bool, int, int>, int> seen;
    for (const ScheduleStep& step : order) ++seen[{step.forward, step.micro_batch, step.chunk}];
    EXPECT_EQ(seen.size(), 12u);
    for (const auto& [step, count] : seen) EXPECT_EQ(count, 1);
  }
}

TEST(DoubleStrand, TheModelFoldsStageZeroHoldsBothEnds) {
  const ModelConfig m = testing::llama_shaped(8);
  const Strategy st = make_strategy(2, 2, 1, true, 1, Schedule::double_strand);
  EXPECT_EQ(first_layer_of(m, st, 0, 0), 0);
  EXPECT_EQ(first_layer_of(m, st, 0, 1), 6);
  EXPECT_EQ(first_layer_of(m, st, 1, 0), 2);
  EXPECT_EQ(first_layer_of(m, st, 1, 1), 4);
  EXPECT_EQ(layers_in_virtual_stage(m, st, 3), 2);
  const std::int64_t layer = layer_parameters_per_rank(m, 0, 2, 1).dense;
  EXPECT_EQ(stage_parameters_per_rank(m, st, 0).dense,
            4 * layer + embedding_parameters_per_rank(m, 2) + output_parameters_per_rank(m, 2, true));
  EXPECT_EQ(stage_parameters_per_rank(m, st, 1).dense, 4 * layer);
}

TEST(DoubleStrand, LoweringRunsTwoStrandsAndOneP2pCarriesBothTensors) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 2, 2048, 64);
  Strategy st = make_strategy(2, 2, 1, true, 1, Schedule::double_strand);
  st.micro_batch_size = 2;
  ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  std::vector<StrandPairingSummary> pairings;
  const IterationGraph g = lower_to_op_graphs(sc, st, builtin_profile(), &pairings);
  check_well_formed(g);
  const std::int64_t tensor_bytes = 2 * 2048 / 2 * 1024 * 2;  // mbs*seq/tp tokens x hidden, bf16
  for (const RankClass& rc : g.classes) {
    int doubled = 0, single = 0;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind == OpKind::send && op.group == GroupKind::pipeline) (op.bytes == 2 * tensor_bytes ? doubled : single)++;
      if (op.is_communication() || op.phase == Phase::optimizer) continue;
      // The forward strand computes on compute, the backward strand (recompute included) on compute2.
      EXPECT_EQ(op.stream, op.phase == Phase::forward && !op.recomputed ? Stream::compute : Stream::compute2)
          << op_name(op);
    }
    // dp 4, m = 64 / (2 * 4) = 8 micro-batches, 10 units: every unit sends once per stage; the 2 warm-up
    // and 2 cool-down units carry one tensor, the other 6 two.
    EXPECT_EQ(doubled, 6) << rc.label;
    EXPECT_EQ(single, 4) << rc.label;
  }
  // Stage 0 pairs embedding | output layer, layer | layer, output layer | embedding.
  ASSERT_EQ(pairings.size(), 3u);
  EXPECT_EQ(pairings[1].forward_unit, "layer");
  EXPECT_LT(pairings[1].paired_ns, pairings[1].serial_ns);
  EXPECT_GT(pairings[1].paired_blocks, 0);
  const IterationResult r = simulate_iteration(g, sc.cluster, builtin_profile());
  EXPECT_GT(r.iteration_ns, 0);
}

TEST(DoubleStrand, ContextAndExpertParallelShapesReplayInTheEngine) {
  const Scenario sc = make_scenario(testing::moe_shaped(), 2, 1024, 32);
  std::vector<Strategy> cases = {make_strategy(1, 2, 2, false, 1, Schedule::double_strand),
                                 make_strategy(2, 1, 2, true, 1, Schedule::double_strand),
                                 make_strategy(1, 2, 1, false, 1, Schedule::double_strand)};
  cases[0].recompute = Recompute::full;
  cases[1].recompute = Recompute::selective;
  cases[1].expert_model_parallel_size = 2;
  cases[2].expert_model_parallel_size = 8;
  cases[2].zero_stage = 2;
  for (Strategy st : cases) {
    ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
    ASSERT_EQ(invalid_reason(sc, st), std::nullopt) << st.key();
    const IterationGraph g = lower_to_op_graphs(sc, st, builtin_profile());
    check_well_formed(g);
    const IterationResult r = simulate_iteration(g, sc.cluster, builtin_profile());
    EXPECT_GT(r.iteration_ns, 0) << st.key();
    for (const ClassResult& c : r.classes) EXPECT_LE(c.finish_ns, r.iteration_ns);
  }
}

TEST(DoubleStrand, MemoryHoldsOneMoreUnitThanTheMicroBatchItFrees) {
  // pp 1, m 2: 1F1B holds one micro-batch's 8 layers and the logits (8a + H). Double strand saves the
  // next micro-batch's unit before freeing the mirror unit: 8a + max(a, H).
  const Scenario sc = make_scenario(testing::llama_shaped(8), 1, 2048, 16);
  Strategy base = make_strategy(4, 1);
  base.micro_batch_size = 4;  // dp 2: 16 / (4 * 2) = 2 micro-batches
  ASSERT_EQ(complete_strategy(sc, base), std::nullopt);
  ASSERT_EQ(base.num_micro_batches, 2);
  Strategy ds = base;
  ds.schedule = Schedule::double_strand;
  const ModelConfig& m = sc.model;
  const double a = static_cast<double>(activation_bytes_per_layer(m, 2048, 4, 4, true, 1, Recompute::none));
  const double tokens = 4.0 * 2048, tokens_local = tokens / 4;
  // The fused loss keeps the bf16 logits of the vocabulary shard.
  const double head = 2 * (2.0 * tokens_local * m.hidden_size) + 2.0 * tokens * (padded_vocab_size(m, 4) / 4);
  EXPECT_EQ(estimate_memory(sc, base).per_stage[0].activations, std::llround(8 * a + head));
  EXPECT_EQ(estimate_memory(sc, ds).per_stage[0].activations, std::llround(8 * a + std::max(a, head)));
}

// The shipped scenario: TP 4 and 8 with SP on one H100 node, where every layer's all-gathers and
// reduce-scatters sit on 1F1B's critical path.
TEST(DoubleStrand, HidesTheTensorParallelCommunicationThat1F1BExposes) {
  const Scenario sc = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/llama2-13b-8xH100-double-strand.json");
  const std::vector<Candidate> ranked = search(sc, builtin_profile(), {}, SearchOptions{2, {}});
  std::map<std::string, const Candidate*> by_key;
  for (const Candidate& c : ranked)
    if (c.feasible) by_key[c.strategy.key()] = &c;
  int compared = 0;
  for (const auto& [key, ds] : by_key) {
    if (ds->strategy.schedule != Schedule::double_strand) continue;
    Strategy same = ds->strategy;
    same.schedule = Schedule::one_f_one_b;
    ASSERT_TRUE(by_key.count(same.key())) << same.key();
    const Candidate& base = *by_key[same.key()];
    // Exposed communication falls by more than half, and the iteration is faster.
    EXPECT_LT(2 * ds->result.breakdown.exposed_communication_ns, base.result.breakdown.exposed_communication_ns) << key;
    EXPECT_LT(ds->result.iteration_ns, base.result.iteration_ns) << key;
    // What the iteration gains is at most the communication it no longer exposes (compute is shared,
    // never faster), and the warm-up and cool-down units keep the pipeline full at pp = 1.
    EXPECT_LE(base.result.iteration_ns - ds->result.iteration_ns,
              base.result.breakdown.exposed_communication_ns - ds->result.breakdown.exposed_communication_ns +
                  base.result.breakdown.bubble_ns)
        << key;
    ++compared;
  }
  EXPECT_GE(compared, 8);
  ASSERT_FALSE(ranked.empty());
  EXPECT_EQ(ranked.front().strategy.schedule, Schedule::double_strand);
}

}  // namespace
}  // namespace twin
