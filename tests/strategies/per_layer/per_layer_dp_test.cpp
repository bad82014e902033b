// The per-layer dynamic programme and the memory-balanced stage split on cases small enough to check
// by hand.
#include <gtest/gtest.h>

#include "strategies/per_layer/per_layer_dp.hpp"

namespace twin {
namespace {

// A: slow and lean, B: fast and big. Budget 14 in 14 quanta of 1 byte.
DpProblem two_options() {
  DpProblem p;
  p.layers = 3;
  p.options = {{10, 4}, {6, 6}};
  p.budget_bytes = 14;
  p.memory_buckets = 14;
  return p;
}

TEST(PerLayerDp, TakesTheFastOptionOnAsManyLayersAsTheBudgetAllows) {
  // All B: 18 bytes; two B: 16; one B: 6 + 4 + 4 = 14 fits, time 6 + 10 + 10 = 26.
  const DpSolution s = choose_layer_options(two_options());
  ASSERT_TRUE(s.feasible);
  EXPECT_DOUBLE_EQ(s.time, 26);
  EXPECT_DOUBLE_EQ(s.memory_bytes, 14);
  EXPECT_EQ(std::count(s.choice.begin(), s.choice.end(), 1), 1);
}

TEST(PerLayerDp, TiesKeepTheLowerOptionOnTheLaterLayers) {
  // One B of three: on the first layer (the backtrack keeps the lower option index on each later layer).
  EXPECT_EQ(choose_layer_options(two_options()).choice, (std::vector<int>{1, 0, 0}));
}

TEST(PerLayerDp, UniformChoicesStayInTheSpace) {
  DpProblem p = two_options();
  p.budget_bytes = 18;
  p.memory_buckets = 18;
  const DpSolution s = choose_layer_options(p);
  EXPECT_DOUBLE_EQ(s.time, 18);
  EXPECT_EQ(s.choice, (std::vector<int>{1, 1, 1}));
}

TEST(PerLayerDp, NothingFitsIsInfeasibleAndQuantaRoundUp) {
  DpProblem p = two_options();
  p.budget_bytes = 11;  // three A need 12
  p.memory_buckets = 11;
  EXPECT_FALSE(choose_layer_options(p).feasible);
  // 1.5 quanta per layer count as 2: two layers need 4 quanta of a 3-quantum budget.
  DpProblem q;
  q.layers = 2;
  q.options = {{1, 1.5}};
  q.budget_bytes = 3;
  q.memory_buckets = 3;
  EXPECT_FALSE(choose_layer_options(q).feasible);
  q.memory_buckets = 6;  // finer quanta: 3 + 3 = 6 fits
  EXPECT_TRUE(choose_layer_options(q).feasible);
}

TEST(PerLayerDp, MemoryBalancedSplitEvensThePeaks) {
  // max(3a, b), a + b = 8: a = 2, b = 6 (both peak at 6).
  EXPECT_EQ(memory_balanced_split(8, {0, 0}, {3, 1}), (std::vector<int>{2, 6}));
  // A heavy first stage keeps one layer: peaks 12 and 7.
  EXPECT_EQ(memory_balanced_split(8, {10, 0}, {2, 1}), (std::vector<int>{1, 7}));
  EXPECT_EQ(memory_balanced_split(6, {0, 0, 0}, {1, 1, 1}), (std::vector<int>{2, 2, 2}));
}

}  // namespace
}  // namespace twin
