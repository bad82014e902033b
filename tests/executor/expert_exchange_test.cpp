// Expert parallelism's exchange plan, replayed on labelled rows: every copy reaches the rank holding its expert,
// grouped by local expert with sources in rank order (the grouped GEMMs' layout), and combine brings every row
// back to where it left; under uniform routing a rank sends the bytes the simulator's all-to-all prices.
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "executor/expert_exchange.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

// A copy: (source rank, global expert, its index among the source's copies of that expert).
using Copy = std::tuple<int, int, std::int64_t>;

// Replays the plans of all `ep` ranks as the grouped sends and receives would move rows (a chunk's rows in order).
void replay(const std::vector<std::int64_t>& routed, int ep, int experts) {
  std::vector<ExpertExchange> plans;
  for (int r = 0; r < ep; ++r) plans.push_back(plan_expert_exchange(routed, ep, experts, r));
  const int local = experts / ep;
  // Each rank's copies sorted by global expert.
  std::vector<std::vector<Copy>> tokens(static_cast<std::size_t>(ep));
  for (int r = 0; r < ep; ++r)
    for (int e = 0; e < experts; ++e)
      for (std::int64_t i = 0; i < routed[r * experts + e]; ++i) tokens[r].push_back({r, e, i});
  for (int r = 0; r < ep; ++r) ASSERT_EQ(plans[r].rows_routed, static_cast<std::int64_t>(tokens[r].size()));
  // Dispatch: per ordered pair, the sender's chunks in order fill the receiver's chunks in order.
  std::vector<std::vector<Copy>> held(static_cast<std::size_t>(ep));
  for (int r = 0; r < ep; ++r) held[r].resize(static_cast<std::size_t>(plans[r].rows_held));
  for (int from = 0; from < ep; ++from)
    for (int to = 0; to < ep; ++to) {
      std::vector<Copy> stream;
      for (const ExchangeChunk& c : plans[from].from_tokens)
        if (c.peer == to)
          stream.insert(stream.end(), tokens[from].begin() + c.row, tokens[from].begin() + c.row + c.rows);
      std::size_t next = 0;
      for (const ExchangeChunk& c : plans[to].at_experts)
        if (c.peer == from)
          for (std::int64_t i = 0; i < c.rows; ++i) held[to][c.row + i] = stream.at(next++);
      EXPECT_EQ(next, stream.size()) << from << " -> " << to;
    }
  for (int r = 0; r < ep; ++r) {
    // Grouped by local expert in the GEMMs' counts, sources ascending within an expert.
    std::int64_t row = 0;
    for (int j = 0; j < local; ++j) {
      std::int64_t expected = 0;
      for (int source = 0; source < ep; ++source) expected += routed[source * experts + r * local + j];
      EXPECT_EQ(plans[r].local_expert_rows[j], expected);
      for (std::int64_t i = 0; i < expected; ++i, ++row) {
        EXPECT_EQ(std::get<1>(held[r][row]), r * local + j) << "rank " << r << " row " << row;
        if (i > 0) EXPECT_LE(std::get<0>(held[r][row - 1]), std::get<0>(held[r][row]));
      }
    }
    EXPECT_EQ(row, plans[r].rows_held);
  }
  // Combine: the holders' rows back, each to the place it left.
  std::vector<std::vector<Copy>> back(static_cast<std::size_t>(ep));
  for (int r = 0; r < ep; ++r) back[r].resize(tokens[r].size());
  for (int from = 0; from < ep; ++from)
    for (int to = 0; to < ep; ++to) {
      std::vector<Copy> stream;
      for (const ExchangeChunk& c : plans[from].at_experts)
        if (c.peer == to) stream.insert(stream.end(), held[from].begin() + c.row, held[from].begin() + c.row + c.rows);
      std::size_t next = 0;
      for (const ExchangeChunk& c : plans[to].from_tokens)
        if (c.peer == from)
          for (std::int64_t i = 0; i < c.rows; ++i) back[to][c.row + i] = stream.at(next++);
    }
  EXPECT_EQ(back, tokens);
}

TEST(ExpertExchange, EveryCopyReachesItsExpertAndComesBack) {
  std::mt19937 random(7);
  for (auto [ep, experts] : {std::pair{2, 8}, std::pair{4, 8}, std::pair{8, 8}, std::pair{2, 2}, std::pair{4, 64}}) {
    std::vector<std::int64_t> routed(static_cast<std::size_t>(ep * experts));
    for (std::int64_t& count : routed) count = random() % 5 == 0 ? 0 : random() % 40;  // empty chunks too
    replay(routed, ep, experts);
  }
}

TEST(ExpertExchange, UniformRoutingSendsWhatTheSimulatorPrices) {
  Scenario scenario = testing::make_scenario(testing::moe_shaped(), 1, 1024, 16);  // 8 experts, top-2, 8 GPUs
  scenario.model.moe.routing_imbalance = 1.0;
  Strategy s = testing::make_strategy(1, 1, 1, false);
  s.expert_model_parallel_size = 4;
  ASSERT_FALSE(complete_strategy(scenario, s).has_value());
  const lowering::RankShapes shapes = lowering::rank_shapes(scenario, s);
  const int experts = static_cast<int>(shapes.experts_total);
  const std::int64_t routed_rows = shapes.tokens_local * scenario.model.moe.top_k;
  ASSERT_EQ(routed_rows % experts, 0);
  const std::vector<std::int64_t> routed(static_cast<std::size_t>(shapes.ep * experts), routed_rows / experts);
  for (int r = 0; r < shapes.ep; ++r) {
    const ExpertExchange x = plan_expert_exchange(routed, shapes.ep, experts, r);
    std::int64_t sent = 0;
    for (const ExchangeChunk& c : x.from_tokens) sent += c.rows;
    const lowering::MoeLayerShapes& layer = shapes.moe_layer(0);
    EXPECT_EQ(sent * shapes.h * 2, layer.dispatch_bytes);  // bf16 rows of hidden, own share included
    EXPECT_EQ(x.rows_held, layer.expert_tokens * shapes.experts_local);  // the grouped GEMMs' rows
  }
}

TEST(ExpertExchange, RefusesCountsThatDoNotFit) {
  EXPECT_THROW(plan_expert_exchange({1, 2, 3}, 2, 2, 0), std::invalid_argument);        // 3 counts for 4
  EXPECT_THROW(plan_expert_exchange({1, 2, 3, 4, 5, 6}, 2, 3, 0), std::invalid_argument);  // 3 experts over 2
  EXPECT_THROW(plan_expert_exchange({1, -2, 3, 4}, 2, 2, 1), std::invalid_argument);
  EXPECT_THROW(plan_expert_exchange({1, 2, 3, 4}, 2, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace twin::exec
