// Every op the lowerings make says what it is: each GEMM which product of its linear it computes, each
// tensor-parallel collective around a linear which linear and which of its tensors it moves, each send and receive
// what it moves (and a double-strand transfer which strands), each attention under context parallelism its form,
// each norm which norm. The executor
// binds ops by these fields alone (executor/op_binding.hpp), so a lowering that forgets one must fail here.
#include <gtest/gtest.h>

#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

struct Case {
  const char* name;
  Strategy strategy;
  bool moe = false;
  bool tp_comm_overlap = false;
  bool cp_all_gather = false;
  bool layernorm = false;
};

void expect_ops_say_what_they_are(const Case& c) {
  Scenario scenario = testing::make_scenario(c.moe ? testing::moe_shaped() : testing::llama_shaped(4), 2, 2048, 64);
  scenario.framework.tp_comm_overlap = c.tp_comm_overlap;
  if (c.cp_all_gather) scenario.framework.cp_comm_type = CpCommType::all_gather;
  if (c.layernorm) scenario.model.normalization = Normalization::layernorm;
  Strategy strategy = c.strategy;
  ASSERT_FALSE(complete_strategy(scenario, strategy).has_value()) << c.name;
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  int gemms = 0, tensor_collectives = 0;
  for (const RankClass& rc : graph.classes) {
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.kind == OpKind::gemm || op.kind == OpKind::moe_router) {
        ++gemms;
        EXPECT_NE(op.gemm_pass, GemmPass::none) << c.name << ": " << op_name(op);
        EXPECT_EQ(op.gemm_pass == GemmPass::forward, op.phase == Phase::forward) << c.name << ": " << op_name(op);
      }
      const bool point_to_point = op.kind == OpKind::send || op.kind == OpKind::recv;
      EXPECT_EQ(point_to_point, op.transfer != Transfer::none) << c.name << ": " << op_name(op);
      if (op.transfer == Transfer::strands)
        EXPECT_TRUE(op.strands.forward_micro_batch >= 0 || op.strands.backward_micro_batch >= 0) << op_name(op);
      if (op.kind == OpKind::norm_forward || op.kind == OpKind::norm_backward)
        EXPECT_EQ(op.normalization, scenario.model.normalization) << c.name << ": " << op_name(op);
      const bool attention = op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward;
      if (attention)
        EXPECT_EQ(op.context_form, strategy.context_parallel_size == 1 ? ContextForm::none
                                   : c.cp_all_gather                   ? ContextForm::all_gather
                                                                       : ContextForm::ring)
            << c.name << ": " << op_name(op);
      const bool around_linear =
          op.role == OpRole::tp_gather || op.role == OpRole::tp_scatter || op.role == OpRole::tp_reduce;
      if (around_linear && op.group == GroupKind::tensor) {
        ++tensor_collectives;
        EXPECT_NE(op.linear, OpRole::none) << c.name << ": " << op_name(op);
        EXPECT_NE(op.linear_tensor, LinearTensor::none) << c.name << ": " << op_name(op);
        const bool gradient =
            op.linear_tensor == LinearTensor::output_gradient || op.linear_tensor == LinearTensor::input_gradient;
        // A forward tensor gathered again in backward (SP's input for the weight gradient) is the only
        // forward tensor a backward collective moves.
        if (op.phase == Phase::forward) EXPECT_FALSE(gradient) << c.name << ": " << op_name(op);
      }
    }
  }
  EXPECT_GT(gemms, 0) << c.name;
  if (strategy.tensor_model_parallel_size > 1) EXPECT_GT(tensor_collectives, 0) << c.name;
}

TEST(OpIdentity, EveryGemmAndTensorCollectiveSaysWhatItIs) {
  Strategy interleaved = testing::make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b);
  Strategy full_recompute = testing::make_strategy(4, 1, 1, false);
  full_recompute.recompute = Recompute::full;
  Strategy moe = testing::make_strategy(2, 1, 1, true);
  moe.expert_model_parallel_size = 2;
  Strategy strands = testing::make_strategy(1, 2, 1, false);
  strands.schedule = Schedule::double_strand;
  for (const Case& c : {Case{"tp2 sp", testing::make_strategy(2, 1, 1, true)},
                        Case{"tp4 no sp, full recompute", full_recompute},
                        Case{"tp2 pp2 interleaved", interleaved},
                        Case{"tp2 cp2", testing::make_strategy(2, 1, 2, true)},
                        Case{"tp2 userbuffers", testing::make_strategy(2, 1, 1, true), false, true},
                        Case{"moe ep2", moe, true},
                        Case{"double strand pp2", strands},
                        Case{"tp2 cp2 all-gathered", testing::make_strategy(2, 1, 2, true), false, false, true},
                        Case{"layernorm", testing::make_strategy(2, 2, 1, true), false, false, false, true}})
    expect_ops_say_what_they_are(c);
}

}  // namespace
}  // namespace twin
