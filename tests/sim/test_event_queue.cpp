// The event queue pops by time, and equal times in insertion order (the engine's determinism rests on it).
#include <gtest/gtest.h>

#include "sim/event_queue.hpp"

namespace twin::sim {
namespace {

TEST(EventQueue, PopsByTimeThenInsertionOrder) {
  EventQueue queue;
  queue.push(50, 0, 0);
  queue.push(10, 1, 0);
  queue.push(50, 2, 0);
  queue.push(10, 3, 0);
  queue.push(30, 4, 7);
  queue.push(50, 5, 0);
  const std::uint32_t expected[] = {1, 3, 4, 0, 2, 5};
  for (std::uint32_t activity : expected) {
    ASSERT_FALSE(queue.empty());
    EXPECT_EQ(queue.pop().activity, activity);
  }
  EXPECT_TRUE(queue.empty());
  EXPECT_EQ(queue.pushed(), 6u);
}

TEST(EventQueue, ManyEqualTimesStayFifoThroughInterleavedPops) {
  EventQueue queue;
  std::uint32_t next = 0, expected = 0;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 7; ++i) queue.push(1000, next++, 0);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(queue.pop().activity, expected++);
  }
  while (!queue.empty()) EXPECT_EQ(queue.pop().activity, expected++);
  EXPECT_EQ(expected, next);
}

}  // namespace
}  // namespace twin::sim
