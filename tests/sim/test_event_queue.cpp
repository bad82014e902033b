// The event queue pops by time, and equal times in scheduling order (the engine's determinism rests on it); a
// rescheduled activity pops once, as if scheduled anew.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "sim/event_queue.hpp"

namespace twin::sim {
namespace {

TEST(EventQueue, PopsByTimeThenInsertionOrder) {
  EventQueue queue;
  queue.schedule(0, 50);
  queue.schedule(1, 10);
  queue.schedule(2, 50);
  queue.schedule(3, 10);
  queue.schedule(4, 30);
  queue.schedule(5, 50);
  const std::uint32_t expected[] = {1, 3, 4, 0, 2, 5};
  for (std::uint32_t activity : expected) {
    ASSERT_FALSE(queue.empty());
    EXPECT_EQ(queue.pop().activity, activity);
  }
  EXPECT_TRUE(queue.empty());
}

TEST(EventQueue, ManyEqualTimesStayFifoThroughInterleavedPops) {
  EventQueue queue;
  std::uint32_t next = 0, expected = 0;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 7; ++i) queue.schedule(next++, 1000);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(queue.pop().activity, expected++);
  }
  while (!queue.empty()) EXPECT_EQ(queue.pop().activity, expected++);
  EXPECT_EQ(expected, next);
}

TEST(EventQueue, RescheduledActivityPopsOnceAtItsNewTimeAfterEarlierEqualTimes) {
  EventQueue queue;
  queue.schedule(0, 10);
  queue.schedule(1, 20);
  queue.schedule(2, 30);
  queue.schedule(0, 20);  // later: now after 1, which was scheduled for 20 first
  queue.schedule(2, 5);   // earlier
  EXPECT_EQ(queue.size(), 3u);
  const std::tuple<TimeNs, std::uint32_t> expected[] = {{5, 2}, {20, 1}, {20, 0}};
  for (const auto& [time, activity] : expected) {
    const Event event = queue.pop();
    EXPECT_EQ(event.time_ns, time);
    EXPECT_EQ(event.activity, activity);
  }
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(queue.scheduled(0));
}

// The queue against a plain model (the latest (time, seq) per activity, popped smallest first) over random
// schedules, reschedules and pops, with a sequence limit low enough that renumbering happens many times.
TEST(EventQueue, MatchesAModelThroughReschedulesAndRenumbering) {
  for (std::uint64_t seq_limit : {EventQueue::kSeqLimit, std::uint64_t{64}}) {
    EventQueue queue(seq_limit);
    std::vector<std::tuple<TimeNs, std::uint64_t, std::uint32_t>> model;  // (time, seq, activity)
    std::mt19937 random(7);
    std::uint64_t seq = 0;
    TimeNs now = 0;
    for (int step = 0; step < 20'000; ++step) {
      if (model.size() < 24 && random() % 3 != 0) {
        const auto activity = static_cast<std::uint32_t>(random() % 32);
        const TimeNs time = now + static_cast<TimeNs>(random() % 8);  // many equal times
        std::erase_if(model, [&](const auto& e) { return std::get<2>(e) == activity; });
        model.emplace_back(time, seq++, activity);
        queue.schedule(activity, time);
      } else if (!model.empty()) {
        const auto first = std::min_element(model.begin(), model.end());
        const Event event = queue.pop();
        ASSERT_EQ(event.time_ns, std::get<0>(*first)) << "step " << step;
        ASSERT_EQ(event.activity, std::get<2>(*first)) << "step " << step;
        now = event.time_ns;
        model.erase(first);
      }
      ASSERT_EQ(queue.size(), model.size());
    }
  }
}

}  // namespace
}  // namespace twin::sim
