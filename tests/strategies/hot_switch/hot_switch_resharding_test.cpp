// Re-sharding bytes of a hot switch, against closed forms worked out by hand on an 8-GPU node (and a
// 2x4 cluster for the intra-node sender preference). S is a unit's TP-split element count, R its
// replicated one; the layouts are Megatron's rank order (tp fastest, then cp, dp, pp).
#include <cstdlib>
#include <numeric>

#include <gtest/gtest.h>

#include "strategies/hot_switch/hot_switch_resharding.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::h100_nodes;
using testing::llama_shaped;
using testing::make_strategy;

Strategy layout(int tp, int pp, int dp, int zero) {
  Strategy s = make_strategy(tp, pp);
  s.data_parallel_size = dp;
  s.zero_stage = zero;
  return s;
}

Cluster nodes_of(int count, int gpus_per_node) {
  Cluster c = h100_nodes(count);
  c.node_groups[0].gpus_per_node = gpus_per_node;
  return c;
}

TEST(HotSwitchResharding, UnitsSplitLlamaLayersIntoTpShardedAndReplicatedParts) {
  const ModelConfig m = llama_shaped(4);  // h 1024, 16 heads of 64, 4 query groups, SwiGLU ffn 2816
  const std::vector<SwitchUnit> units = switch_units(m);
  ASSERT_EQ(units.size(), 6u);
  EXPECT_EQ(units[1].tp_split_elements, 1024 * (16 + 8) * 64 + 16 * 64 * 1024 + 3 * 1024 * 2816);
  EXPECT_EQ(units[1].replicated_elements, 2 * 1024);  // two RMSNorms
  EXPECT_EQ(units[0].tp_split_elements, 32000 * 1024);
  EXPECT_EQ(units[5].tp_split_elements, 32000 * 1024);  // untied output projection
  EXPECT_EQ(units[5].replicated_elements, 1024);        // final norm
}

// dp8 holds every bf16 weight on every GPU: switching to any layout moves no weights.
TEST(HotSwitchResharding, FromPureDataParallelWeightsAreAlreadyLocal) {
  const ModelConfig m = llama_shaped(4);
  const SwitchPlan plan = plan_switch(m, h100_nodes(1), layout(1, 1, 8, 1), layout(2, 2, 2, 1), false);
  EXPECT_EQ(plan.total_bytes(), 0);
  EXPECT_TRUE(plan.transfers.empty());
}

// Gradients, dp8 ZeRO-1 (rank r holds eighth r) -> tp2.pp2.dp2 ZeRO-1 (rank (t, d) of a stage holds quarter
// 2t + d). Per unit the receivers get 3S/4 of the split part (stage 0: S/8 + S/8 + S/4 + S/4) and 7R/4 of
// the replicated part (two halves of R, each needed by two ranks that own at most one eighth of it), at
// 4 bytes each: 3S + 7R bytes.
TEST(HotSwitchResharding, GradientsFromZero1DataParallelToTpPpMatchTheClosedForm) {
  const ModelConfig m = llama_shaped(4);
  const SwitchPlan plan = plan_switch(m, h100_nodes(1), layout(1, 1, 8, 1), layout(2, 2, 2, 1), true);
  Bytes expected = 0;
  for (const SwitchUnit& u : switch_units(m)) expected += 3 * u.tp_split_elements + 7 * u.replicated_elements;
  EXPECT_EQ(plan.total_bytes(), expected);
  EXPECT_EQ(plan.inter_node_bytes, 0);
  // Rank 1 (t1, d0, stage 0) owns none of layer 0's quarter [S/2, 3S/4) (eighths 4 and 5, from ranks 4, 5)
  // and 3 of the 4 eighths of R's first half: 4 * (S/4 + 3R/8) bytes.
  const SwitchUnit& layer0 = switch_units(m)[1];
  Bytes to_rank1 = 0;
  for (const SwitchTransfer& t : plan.transfers)
    if (t.unit == 1 && t.to_rank == 1) to_rank1 += t.bytes;
  EXPECT_EQ(to_rank1, 4 * (layer0.tp_split_elements / 4 + 3 * layer0.replicated_elements / 8));
  EXPECT_EQ(owned_elements(m, layout(2, 2, 2, 1), layer0, 1, true),
            layer0.tp_split_elements / 4 + layer0.replicated_elements / 2);
  EXPECT_EQ(owned_elements(m, layout(2, 2, 2, 1), layer0, 5, true), 0);  // stage 1 holds layers 2, 3
}

// Gradients into a ZeRO-0 layout go to the first GPU of each data-parallel group only (reduction_target): its
// reduction at the phase's end adds them in once. tp2.dp4 ZeRO-1 -> tp2.dp4 ZeRO-0: ranks 0 and 1 (dp rank 0)
// receive what they lack of their TP half (3/4 of it, in fp32), no other rank receives anything.
TEST(HotSwitchResharding, GradientsGoToOneGpuOfEachReductionGroup) {
  const ModelConfig m = llama_shaped(4);
  const SwitchPlan plan = plan_switch(m, h100_nodes(1), layout(2, 1, 4, 1), layout(2, 1, 4, 0), true);
  for (const SwitchTransfer& t : plan.transfers) {
    if (t.gradient) {
      EXPECT_LT(t.to_rank, 2);
    }
  }
  Bytes expected = 0;
  for (const SwitchUnit& u : switch_units(m))
    expected += 4 * (u.tp_split_elements / 2 * 3 / 4 + u.replicated_elements * 3 / 4);
  EXPECT_EQ(plan.received_bytes[0], expected);
  for (int rank = 2; rank < 8; ++rank) EXPECT_EQ(plan.received_bytes[rank], 0) << rank;
  EXPECT_TRUE(reduction_target(layout(2, 1, 4, 0), 1));
  EXPECT_FALSE(reduction_target(layout(2, 1, 4, 0), 2));
  EXPECT_TRUE(reduction_target(layout(2, 1, 4, 1), 7));
}

// Weights, tp2.pp2.dp2 -> dp8: every rank needs every unit. A stage's 4 ranks own half the split part
// (need S/2 each), the other stage's 4 own nothing (need S); R is missing on those 4 only:
// (4 S/2 + 4 S + 4 R) * 2 bytes = (12 S + 8 R) bytes per unit.
TEST(HotSwitchResharding, WeightsFromTpPpToPureDataParallelMatchTheClosedForm) {
  const ModelConfig m = llama_shaped(4);
  const SwitchPlan plan = plan_switch(m, h100_nodes(1), layout(2, 2, 2, 1), layout(1, 1, 8, 1), false);
  Bytes expected = 0;
  for (const SwitchUnit& u : switch_units(m)) expected += 12 * u.tp_split_elements + 8 * u.replicated_elements;
  EXPECT_EQ(plan.total_bytes(), expected);
  EXPECT_EQ(std::accumulate(plan.sent_bytes.begin(), plan.sent_bytes.end(), Bytes{0}), expected);
  EXPECT_EQ(std::accumulate(plan.received_bytes.begin(), plan.received_bytes.end(), Bytes{0}), expected);
}

// tp2.dp4 -> tp4.dp2 on 2 nodes of 4 GPUs: every missing quarter has owners on the receiver's own node
// (tp rank 0 of each dp replica), so nothing crosses nodes, and the two intra-node owners share the work.
TEST(HotSwitchResharding, PrefersIntraNodeSendersAndBalancesThem) {
  const ModelConfig m = llama_shaped(4);
  const Cluster cluster = nodes_of(2, 4);
  const SwitchPlan plan = plan_switch(m, cluster, layout(2, 1, 4, 1), layout(4, 1, 2, 1), false);
  EXPECT_EQ(plan.inter_node_bytes, 0);
  EXPECT_GT(plan.intra_node_bytes, 0);
  for (const SwitchTransfer& t : plan.transfers) EXPECT_EQ(cluster.node_of_rank(t.from_rank), cluster.node_of_rank(t.to_rank));
  // Source tp rank 0 of every replica (ranks 0, 2, 4, 6) holds the first half, tp rank 1 (1, 3, 5, 7) the
  // second. Target rank 0 needs [0, S/4) and rank 3 [3S/4, S): already theirs. Rank 1 needs [S/4, S/2)
  // (from 0 or 2), rank 2 [S/2, 3S/4) (from 1 or 3); ranks 5, 6 likewise on node 1: 4 * S/4 * 2 bytes.
  EXPECT_EQ(plan.received_bytes[0], 0);
  EXPECT_EQ(plan.received_bytes[3], 0);
  Bytes expected = 0, largest_slice = 0;
  for (const SwitchUnit& u : switch_units(m)) {
    expected += 2 * u.tp_split_elements;
    largest_slice = std::max<Bytes>(largest_slice, u.tp_split_elements / 4 * 2);
  }
  EXPECT_EQ(plan.total_bytes(), expected);
  EXPECT_GT(plan.sent_bytes[0], 0);
  EXPECT_GT(plan.sent_bytes[2], 0);
  EXPECT_LE(std::abs(plan.sent_bytes[0] - plan.sent_bytes[2]), largest_slice);
}

}  // namespace
}  // namespace twin
