// The watchdog ends a stuck or failed rank: it names where, aborts the communicators, exits 1. Death
// tests run each case in a child process; the hooks are fakes, so no GPU or NCCL is needed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "executor/watchdog.hpp"

namespace twin::exec {
namespace {

WatchdogHooks fake_hooks(std::string error = {}) {
  return {[error] { return error; }, [] { std::fprintf(stderr, "[communicators aborted]\n"); }};
}

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(WatchdogTest, AHangEndsTheProcessNamingTheRankAndOpAfterTheTimeout) {
  EXPECT_EXIT(
      {
        Watchdog watchdog(1.0, fake_hooks());
        watchdog.arm("rank 3 iteration 2", [] { return std::string("op c0.7 (L0.fc1.fwd.mb0, compute stream)"); });
        sleep_s(5);
      },
      ::testing::ExitedWithCode(1),
      "rank 3 iteration 2: op c0\\.7 \\(L0\\.fc1\\.fwd\\.mb0, compute stream\\) did not finish within 1 s(.|\n)*"
      "communicators aborted");
}

// A host thread stuck inside the CUDA driver (a full launch queue) can block the event queries that name
// the op: the watchdog must still end the process, naming the rank.
TEST_F(WatchdogTest, AStuckOpQueryStillEndsTheProcessNamingTheRank) {
  EXPECT_EXIT(
      {
        Watchdog watchdog(1.0, fake_hooks());
        watchdog.arm("rank 2 iteration 5", [] {
          sleep_s(3600);
          return std::string("never answered");
        });
        sleep_s(10);
      },
      ::testing::ExitedWithCode(1),
      "rank 2 iteration 5: an op \\(which one is unknown: CUDA did not answer the query within 2 s\\) did not "
      "finish within 1 s(.|\n)*communicators aborted");
}

TEST_F(WatchdogTest, AnAsyncNcclErrorEndsTheProcessAtOnce) {
  EXPECT_EXIT(
      {
        Watchdog watchdog(600.0, fake_hooks("remote process exited or there was a network error"));
        watchdog.arm("rank 1", [] { return std::string("op c0.12 (grad_reduce.bwd.mb3, dp stream)"); });
        sleep_s(5);
      },
      ::testing::ExitedWithCode(1), "rank 1: op c0\\.12 .*NCCL reported an error: remote process exited");
}

TEST_F(WatchdogTest, WorkThatFinishesInTimeIsLeftAlone) {
  Watchdog watchdog(0.3, fake_hooks());
  for (int i = 0; i < 3; ++i) {
    watchdog.arm("rank 0", [] { return std::string("never asked"); });
    sleep_s(0.05);
    watchdog.disarm();
  }
  sleep_s(0.5);  // past the timeout while disarmed: still alive
  SUCCEED();
}

TEST(InjectedFault, ParsesTheEnvironmentAndRefusesTypos) {
  unsetenv("TWIN_FAULT_INJECT");
  EXPECT_EQ(injected_fault_from_environment().kind, InjectedFault::none);
  setenv("TWIN_FAULT_INJECT", "hang:1:2", 1);
  const InjectedFault hang = injected_fault_from_environment();
  EXPECT_EQ(hang.kind, InjectedFault::hang);
  EXPECT_TRUE(hang.hits(1, 2));
  EXPECT_FALSE(hang.hits(0, 2));
  setenv("TWIN_FAULT_INJECT", "oom:0:1", 1);
  EXPECT_EQ(injected_fault_from_environment().kind, InjectedFault::out_of_memory);
  setenv("TWIN_FAULT_INJECT", "stall:0:3", 1);
  const InjectedFault stall = injected_fault_from_environment();
  EXPECT_EQ(stall.kind, InjectedFault::stall);
  EXPECT_TRUE(stall.hits(0, 3));
  EXPECT_FALSE(stall.hits(0, 2));
  setenv("TWIN_FAULT_INJECT", "crash:0:1", 1);
  EXPECT_THROW(injected_fault_from_environment(), std::invalid_argument);
  setenv("TWIN_FAULT_INJECT", "hang", 1);
  EXPECT_THROW(injected_fault_from_environment(), std::invalid_argument);
  unsetenv("TWIN_FAULT_INJECT");
}

}  // namespace
}  // namespace twin::exec
