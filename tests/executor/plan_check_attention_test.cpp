// What twin execute refuses of attention's variants, checked without a GPU: sliding windows, soft-capped scores,
// attention sinks and attention dropout run in whole-sequence attention, and under context parallelism (whose ring
// builds its blocks' calls itself) each is refused at its own key.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/executor/plan_check_fixture.hpp"

namespace twin::exec {
namespace {

using testing_plan_check::executed_plan;
using testing_plan_check::refusal_path;

// Sliding windows run on every layer and on alternating ones; under context parallelism (whose ring blocks do not
// carry the window) they are refused at their key.
TEST(PlanCheck, SlidingWindowsRunAtCpOne) {
  Plan plan = executed_plan();
  plan.scenario.model.window_size = plan.scenario.training.seq_length / 2;
  EXPECT_EQ(refusal_path(plan), "");
  plan.scenario.model.window_attn_skip_freq = 2;
  EXPECT_EQ(refusal_path(plan), "");
  Plan ring = plan;
  ring.strategy.context_parallel_size = 2;
  EXPECT_EQ(refusal_path(ring), "/scenario/model/window_size");
}

// Soft-capped attention scores (since 2026-12-01) and gpt-oss's attention sinks (since 2026-12-02) run in
// whole-sequence attention; under context parallelism (whose ring blocks cap none and merge with no sink) each is
// refused at its key.
TEST(PlanCheck, SoftCappedAttentionAndSinksRunAtCpOne) {
  const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>> variants = {
      {"/scenario/model/attention_softcap", [](ModelConfig& m) { m.attention_softcap = 50; }},
      {"/scenario/model/attention_sinks", [](ModelConfig& m) { m.attention_sinks = true; }}};
  for (const auto& [key, set] : variants) {
    Plan plan = executed_plan();
    set(plan.scenario.model);
    EXPECT_EQ(refusal_path(plan), "") << key;
    Plan ring = plan;
    ring.strategy.context_parallel_size = 2;
    EXPECT_EQ(refusal_path(ring), key);
  }
}

// Attention dropout runs in whole-sequence attention; under context parallelism (whose ring blocks draw none) it is
// refused at its key.
TEST(PlanCheck, AttentionDropoutRunsAtCpOne) {
  Plan plan = executed_plan();
  plan.scenario.model.attention_dropout = 0.1;
  EXPECT_EQ(refusal_path(plan), "");
  Plan ring = plan;
  ring.strategy.context_parallel_size = 2;
  EXPECT_EQ(refusal_path(ring), "/scenario/model/attention_dropout");
}

}  // namespace
}  // namespace twin::exec
