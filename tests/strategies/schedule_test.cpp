// Pipeline schedules: every pass once, forward before backward, and the closed forms of each schedule
// (GPipe holds m micro-batches, 1F1B at most p - s, Megatron's interleaved warm-up counts).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "strategies/schedule.hpp"

namespace twin {
namespace {

void expect_each_pass_once(const std::vector<ScheduleStep>& order, int micro_batches, int chunks) {
  std::set<std::tuple<bool, int, int>> seen;
  for (const ScheduleStep& step : order) {
    EXPECT_TRUE(seen.insert({step.forward, step.micro_batch, step.chunk}).second) << "pass repeated";
    if (!step.forward) {  // its forward ran before on this stage
      EXPECT_TRUE(seen.count({true, step.micro_batch, step.chunk}));
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(2 * micro_batches * chunks));
}

int leading_forwards(const std::vector<ScheduleStep>& order) {
  return static_cast<int>(std::find_if(order.begin(), order.end(), [](const ScheduleStep& s) { return !s.forward; }) -
                          order.begin());
}

TEST(Schedule, EveryPassOnceForEverySchedule) {
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 3, 8, 16}) {
      for (const auto& order : pipeline_schedule(Schedule::gpipe, p, m, 1)) expect_each_pass_once(order, m, 1);
      for (const auto& order : pipeline_schedule(Schedule::one_f_one_b, p, m, 1)) expect_each_pass_once(order, m, 1);
    }
  for (int p : {2, 4})
    for (int v : {2, 3})
      for (int m : {p, 2 * p, 4 * p})
        for (const auto& order : pipeline_schedule(Schedule::interleaved_1f1b, p, m, v)) expect_each_pass_once(order, m, v);
}

TEST(Schedule, GpipeHoldsEveryMicroBatch) {
  for (const auto& order : pipeline_schedule(Schedule::gpipe, 4, 12, 1)) {
    EXPECT_EQ(peak_in_flight_passes(order), 12);
    EXPECT_EQ(leading_forwards(order), 12);
  }
}

TEST(Schedule, OneFOneBHoldsAtMostStagesMinusStage) {
  const int p = 8;
  for (int m : {4, 8, 32}) {
    const auto orders = pipeline_schedule(Schedule::one_f_one_b, p, m, 1);
    for (int s = 0; s < p; ++s) {
      EXPECT_LE(peak_in_flight_passes(orders[s]), p - s);
      EXPECT_EQ(peak_in_flight_passes(orders[s]), std::min(p - s, m));
      EXPECT_EQ(leading_forwards(orders[s]), std::min(p - s, m));  // p-s-1 warm-up + the first steady forward
    }
  }
}

TEST(Schedule, OneFOneBStrictlyAlternatesInSteadyState) {
  const auto order = pipeline_schedule(Schedule::one_f_one_b, 4, 8, 1)[1];  // warm-up 2
  const std::vector<bool> expected = {true, true, true, false, true, false, true, false, true, false,
                                      true, false, true, false, false, false};
  ASSERT_EQ(order.size(), expected.size());
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i].forward, expected[i]) << i;
  EXPECT_EQ(order[3], (ScheduleStep{false, 0, 0}));
}

TEST(Schedule, InterleavedWarmupMatchesMegatron) {
  for (int p : {2, 4})
    for (int v : {2, 4})
      for (int m : {p, 2 * p, 8 * p}) {
        const auto orders = pipeline_schedule(Schedule::interleaved_1f1b, p, m, v);
        for (int s = 0; s < p; ++s) {
          const int warmup = std::min((p - s - 1) * 2 + (v - 1) * p, m * v);
          const int expected = warmup < m * v ? warmup + 1 : m * v;  // steady state opens with a forward
          EXPECT_EQ(leading_forwards(orders[s]), expected) << "p=" << p << " v=" << v << " m=" << m << " s=" << s;
        }
      }
}

TEST(Schedule, InterleavedVirtualMicroBatchTable) {
  // p = 2, v = 2, m = 4: forwards walk chunk 0 of micro-batches 0,1, chunk 1 of 0,1, chunk 0 of 2,3, ...
  const auto order = pipeline_schedule(Schedule::interleaved_1f1b, 2, 4, 2)[0];
  std::vector<ScheduleStep> forwards, backwards;
  for (const ScheduleStep& step : order) (step.forward ? forwards : backwards).push_back(step);
  const std::vector<ScheduleStep> expected_forwards = {{true, 0, 0}, {true, 1, 0}, {true, 0, 1}, {true, 1, 1},
                                                       {true, 2, 0}, {true, 3, 0}, {true, 2, 1}, {true, 3, 1}};
  const std::vector<ScheduleStep> expected_backwards = {{false, 0, 1}, {false, 1, 1}, {false, 0, 0}, {false, 1, 0},
                                                        {false, 2, 1}, {false, 3, 1}, {false, 2, 0}, {false, 3, 0}};
  EXPECT_EQ(forwards, expected_forwards);
  EXPECT_EQ(backwards, expected_backwards);
  EXPECT_EQ(leading_forwards(order), 5);  // warm-up (2-0-1)*2 + (2-1)*2 = 4, then the steady forward
}

TEST(Schedule, RejectsWhatItCannotSchedule) {
  EXPECT_THROW(pipeline_schedule(Schedule::interleaved_1f1b, 4, 6, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_schedule(Schedule::double_strand, 2, 4, 2), std::invalid_argument);
}

TEST(Schedule, PeakPerChunk) {
  const auto order = pipeline_schedule(Schedule::gpipe, 2, 3, 2)[0];
  EXPECT_EQ(peak_in_flight_passes(order), 6);
  EXPECT_EQ(peak_in_flight_passes(order, 1), 3);
}

// A double-strand pass is named by its forward strand's chunk and micro-batch (or, in the cool-down, its backward
// strand's): double_strand_step finds every step of every stage's schedule from that name.
TEST(DoubleStrandSchedule, EveryStepIsFoundFromTheMicroBatchItsTransferNames) {
  for (int stages : {1, 2, 4})
    for (int micro_batches : {1, 3, 8}) {
      const auto orders = double_strand_schedule(stages, micro_batches);
      for (const auto& order : orders)
        for (const StrandStep& step : order) {
          if (step.forward_micro_batch < 0 && step.backward_micro_batch < 0) continue;
          const bool has_forward = step.forward_micro_batch >= 0;
          EXPECT_EQ(double_strand_step(stages, micro_batches, step.forward_chunk(), has_forward,
                                       has_forward ? step.forward_micro_batch : step.backward_micro_batch),
                    step)
              << stages << " stages, " << micro_batches << " micro-batches, unit " << step.unit;
        }
    }
  EXPECT_THROW(double_strand_step(2, 4, 0, true, 4), std::invalid_argument);
  EXPECT_THROW(double_strand_step(2, 4, 2, true, 0), std::invalid_argument);
}

}  // namespace
}  // namespace twin
