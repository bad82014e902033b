// Scaling GEMM times to one SM clock (cost/sm_clock.hpp).
#include <gtest/gtest.h>

#include "cost/sm_clock.hpp"

namespace twin {
namespace {

Measurement timed_at(double median_ns, double clock_MHz) {
  Measurement m{median_ns, 0.9 * median_ns, 1.1 * median_ns, 25};
  m.sm_clock_MHz = clock_MHz;
  return m;
}

TEST(SmClock, MedianOfTheRecordedClocksOnly) {
  EXPECT_DOUBLE_EQ(median_sm_clock_MHz({}), 0);
  EXPECT_DOUBLE_EQ(median_sm_clock_MHz({timed_at(1, 0), timed_at(1, 0)}), 0);
  EXPECT_DOUBLE_EQ(median_sm_clock_MHz({timed_at(1, 1400), timed_at(1, 0), timed_at(1, 1800), timed_at(1, 1500)}), 1500);
}

TEST(SmClock, ScalesTimeAsCyclesAtTheReference) {
  // 100 us at 1800 MHz is 180,000 cycles: 120 us at 1500 MHz.
  EXPECT_DOUBLE_EQ(time_at_sm_clock_ns(100e3, 1800, 1500), 120e3);
  EXPECT_DOUBLE_EQ(time_at_sm_clock_ns(100e3, 0, 1500), 100e3);  // clock not recorded
  EXPECT_DOUBLE_EQ(time_at_sm_clock_ns(100e3, 1800, 0), 100e3);  // no reference
  const Measurement scaled = at_sm_clock(timed_at(100e3, 1200), 1500);
  EXPECT_DOUBLE_EQ(scaled.median_ns, 80e3);
  EXPECT_DOUBLE_EQ(scaled.p10_ns, 72e3);
  EXPECT_DOUBLE_EQ(scaled.p90_ns, 88e3);
  EXPECT_DOUBLE_EQ(scaled.sm_clock_MHz, 1200);  // the clock it ran at stays on record
  EXPECT_EQ(scaled.samples, 25);
}

TEST(SmClock, KeepsTheMedianRoundAtTheReference) {
  // In cycles the rounds are 180k, 150k and 165k: the middle one, 165k cycles, is 110 us at 1500 MHz,
  // although its time as measured (100 us) is not the middle one.
  const Measurement kept =
      median_round_at_sm_clock({timed_at(100e3, 1800), timed_at(100e3, 1500), timed_at(100e3, 1650)}, 1500);
  EXPECT_DOUBLE_EQ(kept.median_ns, 110e3);
  EXPECT_DOUBLE_EQ(kept.sm_clock_MHz, 1650);
  // Two rounds: the lower one; one round: itself.
  EXPECT_DOUBLE_EQ(median_round_at_sm_clock({timed_at(90e3, 1500), timed_at(80e3, 1500)}, 1500).median_ns, 80e3);
  EXPECT_DOUBLE_EQ(median_round_at_sm_clock({timed_at(90e3, 1500)}, 1000).median_ns, 135e3);
  EXPECT_THROW(median_round_at_sm_clock({}, 1500), std::invalid_argument);
}

}  // namespace
}  // namespace twin
