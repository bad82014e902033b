// FP8 under sequence parallelism as the lowering states it and the executor binds it (issues 41 and 42): with one
// scale per tensor a tensor SP gathers is cast on the local rows into its rowwise copy only, the gather says it moves
// FP8 (Op::fp8_payload), and where wgrad reads the gathered rows an fp8_transpose op of the same tensor, on the
// compute stream after the gather and before wgrad, writes their columnwise copy (binds to fp8_transpose); under
// current scaling the amax all-reduce over TP before the cast says the tensor it took the amax of and binds to
// fp8_gathered_amax, and the cast says it scales by that amax. Block scales gather both copies as cast.
#include <gtest/gtest.h>

#include "executor/op_binding.hpp"
#include "op_binding_fixtures.hpp"

namespace twin::exec {
namespace {

using testing_binding::fp8_scenario;
using testing_binding::lower;

struct SpOps {
  int gathered_amaxes = 0, reduced_casts = 0, rowwise_only_casts = 0, fp8_gathers = 0, transposes = 0;
};

// A transpose of gathered rows: the whole sequence's rows of its linear's tensor, a byte an element read and one
// written, on the compute stream; it waits for an FP8 gather of that tensor, and the linear's wgrad (next on the
// compute stream) waits for it.
void check_transpose(const RankClass& rc, OpIndex i, const OpBinding& binding) {
  const Op& op = rc.op(i);
  EXPECT_EQ(binding.action, Action::fp8_transpose);
  EXPECT_EQ(binding.subject, op.linear);
  EXPECT_EQ(op.stream, Stream::compute);
  EXPECT_EQ(op.rows, 1024);
  EXPECT_EQ(op.bytes, 2 * op.rows * op.cols);
  EXPECT_TRUE(op.linear_tensor == LinearTensor::input || op.linear_tensor == LinearTensor::output_gradient);
  OpIndex gather = i;  // the latest gather of the tensor before it
  while (gather > 0 && !(rc.op(gather).kind == OpKind::all_gather && rc.op(gather).linear == op.linear &&
                         rc.op(gather).linear_tensor == op.linear_tensor))
    --gather;
  EXPECT_TRUE(rc.op(gather).kind == OpKind::all_gather && rc.op(gather).fp8_payload) << op_name(op);
  bool waits = false;
  for (auto [e, end] = boost::in_edges(i, rc.graph); e != end; ++e) waits |= boost::source(*e, rc.graph) == gather;
  EXPECT_TRUE(waits) << op_name(op) << " does not wait for its gather";
  OpIndex next = i + 1;
  while (next < rc.size() && rc.op(next).stream != Stream::compute) ++next;
  ASSERT_LT(next, rc.size());
  EXPECT_EQ(rc.op(next).gemm_pass, GemmPass::weight_gradient) << op_name(rc.op(next));
  EXPECT_EQ(rc.op(next).role, op.linear);
}

// Over rank class 0 of TP 2 with SP: what each FP8-relevant op says, checked against the op before it.
SpOps sp_ops(Fp8Recipe recipe, bool sequence_parallel = true) {
  const IterationGraph graph = lower(testing::make_strategy(2, 1, 1, sequence_parallel), fp8_scenario(recipe));
  const RankClass& rc = graph.classes[0];
  const std::vector<OpBinding> bindings = bind_ops(rc);
  SpOps ops;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.role == OpRole::fp8_amax && op.group == GroupKind::tensor) {
      ++ops.gathered_amaxes;
      EXPECT_EQ(bindings[i].action, Action::fp8_gathered_amax);
      EXPECT_EQ(bindings[i].subject, op.linear);
      EXPECT_GT(op.rows * op.cols, 0);
      const Op& cast = rc.op(i + 1);  // the cast of the same tensor follows on the compute stream
      EXPECT_EQ(cast.kind, OpKind::fp8_cast);
      EXPECT_TRUE(cast.fp8_amax_reduced);
      EXPECT_EQ(cast.linear, op.linear);
      EXPECT_EQ(cast.linear_tensor, op.linear_tensor);
      EXPECT_EQ(cast.rows, op.rows);
      EXPECT_EQ(cast.cols, op.cols);
    }
    if (op.kind == OpKind::fp8_cast) {
      ops.reduced_casts += op.fp8_amax_reduced;
      ops.rowwise_only_casts += op.linear_tensor != LinearTensor::weight && !op.fp8_columnwise;
    }
    if (op.kind == OpKind::all_gather && op.role == OpRole::tp_gather) {
      // The layers' linears gather FP8; the embedding's gradient and the output layer's input stay bf16.
      const bool layer_linear = op.linear == OpRole::qkv_projection || op.linear == OpRole::fc1 ||
                                op.linear == OpRole::attention_projection || op.linear == OpRole::fc2;
      EXPECT_EQ(op.fp8_payload, layer_linear) << to_string(op.linear);
      EXPECT_FALSE(op.fp8_columnwise);  // the transpose is an op of its own
      ops.fp8_gathers += op.fp8_payload;
      // FP8: 1 byte an element, the whole sequence's rows of an h-wide tensor
      if (op.fp8_payload) EXPECT_EQ(op.bytes, 1024 * testing::llama_shaped(4).hidden_size);
      EXPECT_TRUE(bindings[i].action == Action::gather_input || bindings[i].action == Action::gather_output_grad);
    }
    if (op.kind == OpKind::fp8_transpose) {
      ++ops.transposes;
      check_transpose(rc, i, bindings[i]);
    }
  }
  return ops;
}

TEST(Fp8SequenceParallel, CurrentScalingReducesTheAmaxOverTpCastsRowwiseAndTransposesAfterTheGather) {
  const SpOps ops = sp_ops(Fp8Recipe::tensorwise);
  // Per layer and micro-batch: forward, the column-parallel inputs (QKV, FC1); backward, the row-parallel output
  // gradients (projection, FC2).
  EXPECT_GT(ops.gathered_amaxes, 0);
  EXPECT_EQ(ops.reduced_casts, ops.gathered_amaxes);
  EXPECT_EQ(ops.rowwise_only_casts, ops.gathered_amaxes);
  // Every such tensor is gathered forward and again backward for wgrad (inputs), or once backward (gradients).
  EXPECT_EQ(ops.fp8_gathers, 3 * ops.gathered_amaxes / 2);
  EXPECT_EQ(ops.transposes, ops.gathered_amaxes);  // of the backward gathers: wgrad reads the transpose
}

TEST(Fp8SequenceParallel, DelayedScalingCastsRowwiseWithNoAmaxOverTp) {
  const SpOps ops = sp_ops(Fp8Recipe::delayed);
  EXPECT_EQ(ops.gathered_amaxes, 0);  // the pass's amax reduction (over the amax group) holds TP
  EXPECT_EQ(ops.reduced_casts, 0);
  EXPECT_GT(ops.rowwise_only_casts, 0);
  EXPECT_EQ(ops.fp8_gathers, 3 * ops.rowwise_only_casts / 2);
  EXPECT_EQ(ops.transposes, ops.rowwise_only_casts);
}

TEST(Fp8SequenceParallel, BlockScalesGatherTheCopiesAsCast) {
  Scenario scenario = fp8_scenario(Fp8Recipe::blockwise);
  scenario.training.fp8->format = Fp8Format::e4m3;
  const IterationGraph graph = lower(testing::make_strategy(2, 1, 1, true), scenario);
  for (OpIndex i = 0; i < graph.classes[0].size(); ++i) {
    const Op& op = graph.classes[0].op(i);
    if (op.kind == OpKind::fp8_cast) EXPECT_FALSE(op.fp8_amax_reduced);
    if (op.kind == OpKind::fp8_cast && op.linear_tensor != LinearTensor::weight) EXPECT_TRUE(op.fp8_columnwise);
    EXPECT_NE(op.kind, OpKind::fp8_transpose);  // each copy gathered as cast
  }
}

TEST(Fp8SequenceParallel, WithoutSequenceParallelismNothingIsGathered) {
  const SpOps ops = sp_ops(Fp8Recipe::tensorwise, false);
  EXPECT_EQ(ops.gathered_amaxes, 0);
  EXPECT_EQ(ops.fp8_gathers, 0);
  EXPECT_EQ(ops.rowwise_only_casts, 0);  // every activation cast keeps its columnwise copy for wgrad
  EXPECT_EQ(ops.transposes, 0);
}

}  // namespace
}  // namespace twin::exec
