// The executor's and calibration's kernel entries (gpu/op_kernels.hpp) against the op-kind table: every kind
// calibration times as a kernel of twin's own is launched by some action of the executor through its entry, every
// action that launches an entry launches one of such a kind, and real lowerings bind each op to an action whose
// entry is the op's own kind. (The build holds gpu/op_kernels.hpp's entries to the same table: its static_assert.)
#include <set>

#include <gtest/gtest.h>

#include "core/op_kinds.hpp"
#include "executor/action.hpp"
#include "executor/op_binding.hpp"
#include "../strategies/strategy_fixtures.hpp"
#include "op_binding_fixtures.hpp"

namespace twin::exec {
namespace {

constexpr int kActionCount = static_cast<int>(Action::mla_step) + 1;

bool timed_as_own_kernel(OpKind kind) {
  return op_kind_traits(kind).measured_by == CalibrationMethod::kernel_bench;
}

TEST(KernelEntry, EveryKernelKindTheExecutorRunsHasAnActionLaunchingItsEntry) {
  std::set<OpKind> launched;
  for (int a = 0; a < kActionCount; ++a)
    if (const auto kind = kernel_entry(static_cast<Action>(a))) launched.insert(*kind);
  for (OpKind kind : all_op_kinds()) {
    const bool needs_entry = timed_as_own_kernel(kind) && op_kind_traits(kind).executor_runs;
    EXPECT_EQ(launched.count(kind), needs_entry ? 1u : 0u)
        << to_string(kind) << (needs_entry ? ": calibration times its entry, no action of the executor launches it"
                                           : ": an action launches an entry calibration does not time");
  }
}

TEST(KernelEntry, EveryLaunchedEntryIsAKindCalibrationTimes) {
  for (int a = 0; a < kActionCount; ++a)
    if (const auto kind = kernel_entry(static_cast<Action>(a)))
      EXPECT_TRUE(timed_as_own_kernel(*kind)) << to_string(static_cast<Action>(a)) << " launches " << to_string(*kind);
}

// Dense with TP, SP and PP; context parallelism's ring; MoE with and without expert parallelism; FP8 on one GPU and at
// TP 2 with SP (its gathered rows' transposes).
TEST(KernelEntry, LoweredOpsRunTheEntryOfTheirOwnKind) {
  using testing_binding::lower;
  using testing_binding::moe_on;
  Strategy expert_parallel = testing::make_strategy(1, 1, 1, false);
  expert_parallel.expert_model_parallel_size = 2;
  const std::vector<IterationGraph> graphs = {
      lower(testing::make_strategy(2, 2, 1, true)), lower(testing::make_strategy(1, 1, 2, false)),
      lower(testing::make_strategy(1, 2, 1, false), moe_on(2)), lower(expert_parallel, moe_on(2)),
      lower(testing::make_strategy(1, 1, 1, false), testing_binding::fp8_scenario(Fp8Recipe::tensorwise)),
      lower(testing::make_strategy(2, 1, 1, true), testing_binding::fp8_scenario(Fp8Recipe::tensorwise))};
  int launches = 0;
  for (const IterationGraph& graph : graphs)
    for (const RankClass& rc : graph.classes) {
      const std::vector<OpBinding> bindings = bind_ops(rc);
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const auto kind = kernel_entry(bindings[i].action);
        if (!kind) continue;
        ++launches;
        EXPECT_EQ(*kind, rc.op(i).kind) << op_name(rc.op(i)) << " bound to " << to_string(bindings[i].action);
      }
    }
  EXPECT_GT(launches, 0);
}

}  // namespace
}  // namespace twin::exec
