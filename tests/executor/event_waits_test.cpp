// The executor's event waits: every cross-stream edge of the graph, and each pipeline receive after the compute op
// issued before it (posted earlier, its NCCL kernel would hold SMs through the passes before).
#include <algorithm>

#include <gtest/gtest.h>

#include "executor/event_waits.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "../strategies/strategy_fixtures.hpp"

namespace twin::exec {
namespace {

TEST(EventWaits, EveryCrossStreamEdgeAndEachPipelineReceiveAfterThePrecedingCompute) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 1024, 16);
  for (Schedule schedule : {Schedule::one_f_one_b, Schedule::double_strand}) {
    Strategy s = testing::make_strategy(2, 2, 1, true);
    s.schedule = schedule;
    ASSERT_FALSE(complete_strategy(scenario, s).has_value());
    int receives = 0;
    for (const RankClass& rc : lower_to_op_graphs(scenario, s).classes) {
      const std::vector<std::vector<OpIndex>> waits = event_waits(rc);
      ASSERT_EQ(waits.size(), rc.size());
      OpIndex last_compute = kNoOpIndex;
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        for (auto [edge, end] = boost::in_edges(i, rc.graph); edge != end; ++edge) {
          const auto from = static_cast<OpIndex>(boost::source(*edge, rc.graph));
          const bool listed = std::count(waits[i].begin(), waits[i].end(), from) == 1;
          EXPECT_EQ(listed, rc.op(from).stream != op.stream) << op_name(op);
        }
        for (OpIndex from : waits[i]) EXPECT_LT(from, i) << op_name(op);  // issued before: no wait on the future
        if (op.kind == OpKind::recv && op.group == GroupKind::pipeline && last_compute != kNoOpIndex) {
          ++receives;
          EXPECT_EQ(std::count(waits[i].begin(), waits[i].end(), last_compute), 1) << op_name(op);
        }
        if (op.stream == Stream::compute) last_compute = i;
      }
    }
    EXPECT_GT(receives, 8) << to_string(schedule);
  }
}

}  // namespace
}  // namespace twin::exec
