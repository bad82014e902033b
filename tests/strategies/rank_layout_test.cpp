// The groups of the rank layout, for several shapes: every rank is in exactly one group of each kind, of the
// kind's size, at the position its coordinates give; the spans of a stage's groups over a cluster's nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "strategies/rank_layout.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

struct Shape {
  int tp, cp, dp, pp, ep;
};

Strategy strategy_of(const Shape& shape) {
  Strategy s;
  s.tensor_model_parallel_size = shape.tp;
  s.context_parallel_size = shape.cp;
  s.data_parallel_size = shape.dp;
  s.pipeline_model_parallel_size = shape.pp;
  s.expert_model_parallel_size = shape.ep;
  return s;
}

std::string describe(const Shape& x) {
  return "tp " + std::to_string(x.tp) + " cp " + std::to_string(x.cp) + " dp " + std::to_string(x.dp) + " pp " +
         std::to_string(x.pp) + " ep " + std::to_string(x.ep);
}

// Every kind but the embedding: the groups partition the world, each of `size` ranks, and a rank's slot names
// its group by the lowest member and gives its index in group_members.
void expect_partition(const Strategy& s, GroupKind kind, int size, const std::string& shape) {
  const int world = static_cast<int>(s.world_size());
  std::map<int, std::vector<int>> groups;  // by first rank
  for (int rank = 0; rank < world; ++rank) {
    const std::optional<GroupSlot> slot = group_slot(s, kind, rank);
    ASSERT_TRUE(slot.has_value()) << shape << " " << to_string(kind) << " rank " << rank;
    const std::vector<int> members = group_members(s, kind, rank);
    ASSERT_EQ(static_cast<int>(members.size()), size) << shape << " " << to_string(kind);
    EXPECT_EQ(members.front(), slot->first_rank);
    EXPECT_EQ(*std::min_element(members.begin(), members.end()), slot->first_rank);
    ASSERT_LT(slot->position, size);
    EXPECT_EQ(members[slot->position], rank) << shape << " " << to_string(kind) << " rank " << rank;
    groups[slot->first_rank] = members;
  }
  std::vector<int> times_seen(static_cast<std::size_t>(world), 0);
  for (const auto& [first, members] : groups)
    for (int member : members) {
      ASSERT_GE(member, 0);
      ASSERT_LT(member, world);
      ++times_seen[member];
    }
  for (int rank = 0; rank < world; ++rank)
    EXPECT_EQ(times_seen[rank], 1) << shape << " " << to_string(kind) << " rank " << rank;
}

const Shape kShapes[] = {{1, 1, 1, 1, 1}, {2, 1, 4, 2, 1}, {8, 2, 2, 4, 4}, {4, 2, 3, 3, 2},
                         {1, 1, 8, 1, 8}, {2, 2, 1, 5, 4}, {3, 1, 2, 2, 3}, {1, 4, 1, 2, 2}};

TEST(RankLayout, EveryRankIsInExactlyOneGroupOfEachKind) {
  for (const Shape& x : kShapes) {
    const Strategy s = strategy_of(x);
    const std::string shape = describe(x);
    expect_partition(s, GroupKind::none, 1, shape);
    expect_partition(s, GroupKind::tensor, x.tp, shape);
    expect_partition(s, GroupKind::context, x.cp, shape);
    expect_partition(s, GroupKind::data, x.cp * x.dp, shape);
    expect_partition(s, GroupKind::pipeline, x.pp, shape);
    expect_partition(s, GroupKind::expert, x.ep, shape);
    expect_partition(s, GroupKind::expert_data, x.tp * x.cp * x.dp / x.ep, shape);
    EXPECT_EQ(expert_data_parallel_size(s), x.tp * x.cp * x.dp / x.ep);
  }
}

TEST(RankLayout, CoordinatesInvertGlobalRankInMegatronOrder) {
  const Strategy s = strategy_of({2, 3, 2, 2, 1});
  int rank = 0;  // tensor fastest, then context, data, pipeline
  for (int pp = 0; pp < 2; ++pp)
    for (int dp = 0; dp < 2; ++dp)
      for (int cp = 0; cp < 3; ++cp)
        for (int tp = 0; tp < 2; ++tp, ++rank) {
          EXPECT_EQ(global_rank(s, tp, cp, dp, pp), rank);
          const RankCoordinates c = coordinates_of(s, rank);
          EXPECT_EQ(c.tp, tp);
          EXPECT_EQ(c.cp, cp);
          EXPECT_EQ(c.dp, dp);
          EXPECT_EQ(c.pp, pp);
        }
}

TEST(RankLayout, GroupsVaryOnlyTheirOwnCoordinates) {
  for (const Shape& x : kShapes) {
    const Strategy s = strategy_of(x);
    const int world = static_cast<int>(s.world_size()), stage_ranks = x.tp * x.cp * x.dp;
    for (int rank = 0; rank < world; ++rank) {
      const RankCoordinates me = coordinates_of(s, rank);
      const auto check = [&](GroupKind kind, auto same, auto position_of) {
        const std::vector<int> members = group_members(s, kind, rank);
        for (std::size_t i = 0; i < members.size(); ++i) {
          const RankCoordinates other = coordinates_of(s, members[i]);
          EXPECT_TRUE(same(other)) << describe(x) << " " << to_string(kind) << " rank " << rank;
          EXPECT_EQ(position_of(other, members[i]), static_cast<int>(i)) << describe(x) << " " << to_string(kind);
        }
      };
      check(
          GroupKind::tensor, [&](const RankCoordinates& o) { return o.cp == me.cp && o.dp == me.dp && o.pp == me.pp; },
          [](const RankCoordinates& o, int) { return o.tp; });
      check(
          GroupKind::context, [&](const RankCoordinates& o) { return o.tp == me.tp && o.dp == me.dp && o.pp == me.pp; },
          [](const RankCoordinates& o, int) { return o.cp; });
      check(
          GroupKind::data, [&](const RankCoordinates& o) { return o.tp == me.tp && o.pp == me.pp; },
          [&](const RankCoordinates& o, int) { return o.cp + x.cp * o.dp; });
      check(
          GroupKind::pipeline,
          [&](const RankCoordinates& o) { return o.tp == me.tp && o.cp == me.cp && o.dp == me.dp; },
          [](const RankCoordinates& o, int) { return o.pp; });
      // Expert groups: ep consecutive ranks of one stage; expert_data: a stage's ranks with the same rank % ep.
      check(
          GroupKind::expert, [&](const RankCoordinates& o) { return o.pp == me.pp; },
          [&](const RankCoordinates&, int r) { return r % stage_ranks % x.ep; });
      check(
          GroupKind::expert_data, [&](const RankCoordinates& o) { return o.pp == me.pp; },
          [&](const RankCoordinates&, int r) { return r % stage_ranks / x.ep; });
    }
  }
}

TEST(RankLayout, EmbeddingGroupJoinsTheFirstAndLastStage) {
  const Strategy s = strategy_of({2, 1, 2, 4, 1});  // 4 ranks per stage
  EXPECT_EQ(group_members(s, GroupKind::embedding, 1), (std::vector<int>{1, 13}));
  EXPECT_EQ(group_members(s, GroupKind::embedding, 13), (std::vector<int>{1, 13}));
  EXPECT_EQ(group_slot(s, GroupKind::embedding, 13)->position, 1);
  EXPECT_FALSE(group_slot(s, GroupKind::embedding, 5).has_value());  // a middle stage
  EXPECT_TRUE(group_members(s, GroupKind::embedding, 9).empty());
  const Strategy one_stage = strategy_of({2, 1, 2, 1, 1});
  EXPECT_EQ(group_members(one_stage, GroupKind::embedding, 3), (std::vector<int>{3}));
}

TEST(RankLayout, SpansOfAStageOverEightGpuNodes) {
  const Cluster cluster = testing::h100_nodes(4);
  const Strategy s = strategy_of({8, 1, 2, 2, 4});  // a stage: two nodes; the pipeline: every other node
  const auto spans = group_spans(s, cluster, 1);
  const auto expect_span = [&](GroupKind kind, int size, int ranks_per_node, int nodes) {
    const GroupSpan& span = spans[static_cast<int>(kind)];
    EXPECT_EQ(span.size, size) << to_string(kind);
    EXPECT_EQ(span.ranks_per_node, ranks_per_node) << to_string(kind);
    EXPECT_EQ(span.nodes, nodes) << to_string(kind);
  };
  expect_span(GroupKind::none, 1, 1, 1);
  expect_span(GroupKind::tensor, 8, 8, 1);
  expect_span(GroupKind::data, 2, 1, 2);
  expect_span(GroupKind::pipeline, 2, 1, 2);
  expect_span(GroupKind::embedding, 2, 1, 2);
  expect_span(GroupKind::expert, 4, 4, 1);
  expect_span(GroupKind::expert_data, 4, 2, 2);
}

}  // namespace
}  // namespace twin
