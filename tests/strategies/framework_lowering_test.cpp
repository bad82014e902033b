// What each framework switch (core/framework.hpp) changes in the op graph, and that the graph still runs in
// the engine: Transformer Engine's TP overlap, the unfused cross-entropy, the kernels attention runs as
// (FlashAttention, cuDNN, unfused with dropout). Where weight gradients go: gradient_lowering_test.cpp.

#include <gtest/gtest.h>

#include "cost/memory_bound_bytes.hpp"
#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"
#include "framework_lowering_fixture.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing_framework::count;
using testing_framework::FrameworkLowered;
using testing_framework::iteration_ns;
using testing_framework::lower_with_framework;

TEST(FrameworkLowering, TpCommOverlapPipelinesTheSequenceParallelCollectivesWithTheirGemms) {
  // Widths of a 70B model, where TP 4 moves enough to hide (on a small model the chunked GEMMs cost more
  // than the communication they hide, as Transformer Engine's do).
  ModelConfig model = testing::llama_shaped(4);
  model.hidden_size = 8192;
  model.ffn_hidden_size = 28672;
  model.num_attention_heads = 64;
  model.num_query_groups = 8;
  model.kv_channels = 128;
  Scenario scenario = testing::make_scenario(model, 1, 2048, 8);
  const Strategy tp4 = testing::make_strategy(4, 1);  // SP on
  const FrameworkLowered plain = lower_with_framework(scenario, tp4);
  scenario.framework.tp_comm_overlap = true;
  const FrameworkLowered overlapped = lower_with_framework(scenario, tp4);
  const auto forward_gemms = [](const Op& op) { return op.kind == OpKind::gemm && op.phase == Phase::forward; };
  // qkv, projection, fc1 and fc2 of 4 layers and the output projection, each in 4 chunks of a quarter of
  // the rows (TP 4 ring steps for the gathered ones, initialize_ub's 4 splits for the scattered ones), in
  // every micro-batch's forward; each chunk is priced as its share of the whole GEMM.
  EXPECT_EQ(count(overlapped.graph, forward_gemms),
            count(plain.graph, forward_gemms) + overlapped.strategy.num_micro_batches * (4 * 4 + 1) * 3);
  for (const RankClass& rc : overlapped.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (forward_gemms(rc.op(i)) && rc.op(i).layer >= 0) {
        EXPECT_EQ(rc.op(i).gemm.split, 4) << op_name(rc.op(i));
        EXPECT_EQ(rc.op(i).gemm.m, 2048 / 4) << op_name(rc.op(i));
      }
  // All-gathers: ring steps of one rank's shard of T x h on the copy engines.
  const auto ring_steps = [](const Op& op) { return op.kind == OpKind::send && op.group == GroupKind::tensor; };
  EXPECT_EQ(count(plain.graph, ring_steps), 0);
  EXPECT_GT(count(overlapped.graph, ring_steps), 0);
  for (const RankClass& rc : overlapped.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (ring_steps(rc.op(i))) {
        EXPECT_EQ(rc.op(i).bytes, 2048 * 8192 * 2 / 4);
        EXPECT_EQ(rc.op(i).comm_kernel, CommKernel::userbuffers_copy_engine);
      }
  // Reduce-scatters: a quarter of T x h after each chunk of a row-parallel GEMM, by a userbuffers kernel;
  // no forward all-gather of a layer is left, and every TP collective of a layer is a userbuffers one.
  const auto layer_tp = [](Phase phase, OpKind kind) {
    return [=](const Op& op) {
      return op.group == GroupKind::tensor && op.phase == phase && op.kind == kind && op.layer >= 0;
    };
  };
  const int micro_batches = overlapped.strategy.num_micro_batches;
  EXPECT_EQ(count(overlapped.graph, layer_tp(Phase::forward, OpKind::all_gather)), 0);
  EXPECT_EQ(count(overlapped.graph, layer_tp(Phase::forward, OpKind::reduce_scatter)), micro_batches * 4 * 2 * 4);
  for (const RankClass& rc : overlapped.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.group != GroupKind::tensor || op.layer < 0 || !op.is_communication()) continue;
      EXPECT_NE(op.comm_kernel, CommKernel::nccl) << op_name(op);
      if (op.phase == Phase::forward && op.kind == OpKind::reduce_scatter) EXPECT_EQ(op.bytes, 2048 * 8192 * 2 / 4);
    }
  // The TP time hides under the chunks, so it is not slower.
  EXPECT_LT(iteration_ns(overlapped), iteration_ns(plain));
}

TEST(FrameworkLowering, GradientsAreReducedInTheStatedDtype) {
  // Megatron-LM reduces bf16 training's gradients in fp32 (framework.reduce_dtype float32); twin execute and NeMo's
  // performance recipes in bf16, the default beside any framework but pytorch-fsdp2.
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);  // one node: DP 8
  Strategy dp8 = testing::make_strategy(1, 1);
  dp8.zero_stage = 1;
  dp8.micro_batch_size = 1;
  const auto reduced_bytes = [](const IterationGraph& g) {
    Bytes total = 0;
    for (const RankClass& rc : g.classes)
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (rc.op(i).role == OpRole::grad_reduce && rc.op(i).kind == OpKind::reduce_scatter) total += rc.op(i).bytes;
    return total;
  };
  const FrameworkLowered bf16 = lower_with_framework(scenario, dp8);
  scenario.framework.reduce_dtype_bytes = 2;
  const FrameworkLowered stated_bf16 = lower_with_framework(scenario, dp8);
  scenario.framework.reduce_dtype_bytes = 4;
  const FrameworkLowered fp32 = lower_with_framework(scenario, dp8);
  ASSERT_GT(reduced_bytes(bf16.graph), 0);
  EXPECT_EQ(reduced_bytes(stated_bf16.graph), reduced_bytes(bf16.graph));
  EXPECT_EQ(reduced_bytes(fp32.graph), 2 * reduced_bytes(bf16.graph));
  EXPECT_EQ(iteration_ns(stated_bf16), iteration_ns(bf16));
  EXPECT_GT(iteration_ns(fp32), iteration_ns(bf16));  // the reduce-scatters outlast the backward they overlap
}

TEST(FrameworkLowering, AnEarlyStoppingCheckpointRecomputesNeitherFc2NorTheResidualAfterIt) {
  // PyTorch's non-reentrant checkpoint (framework.checkpoint_early_stop; pytorch-fsdp2's default) stops once fc2's
  // input is made again; Megatron's full recompute runs the whole layer again, its TP collectives included.
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 2048, 8);
  Strategy tp2 = testing::make_strategy(2, 1);
  tp2.recompute = Recompute::full;
  const auto recomputed = [](OpRole role) {
    return [role](const Op& op) { return op.recomputed && op.role == role; };
  };
  const FrameworkLowered whole = lower_with_framework(scenario, tp2);
  scenario.framework.checkpoint_early_stop = true;
  const FrameworkLowered early = lower_with_framework(scenario, tp2);
  for (OpRole role : {OpRole::fc2, OpRole::mlp_residual}) {
    EXPECT_GT(count(whole.graph, recomputed(role)), 0) << to_string(role);
    EXPECT_EQ(count(early.graph, recomputed(role)), 0) << to_string(role);
  }
  for (OpRole role : {OpRole::qkv_projection, OpRole::core_attention, OpRole::fc1, OpRole::activation})
    EXPECT_EQ(count(early.graph, recomputed(role)), count(whole.graph, recomputed(role))) << to_string(role);
  EXPECT_LT(iteration_ns(early), iteration_ns(whole));
  // pytorch-fsdp2 stops early unless the scenario says otherwise.
  scenario.framework.checkpoint_early_stop.reset();
  scenario.framework.name = FrameworkName::pytorch_fsdp2;
  EXPECT_TRUE(recompute_stops_early(scenario.framework));
  scenario.framework.checkpoint_early_stop = false;
  EXPECT_FALSE(recompute_stops_early(scenario.framework));
}

TEST(FrameworkLowering, ScatterGatherSendsEachTpRanksShareOfAPipelineTensor) {
  // Megatron-LM of 2021-22 (Narayanan et al. 2021, section 4.1): without SP each TP rank sends 1/tp of the
  // activation or gradient, and the receiver all-gathers the shares over TP before its compute reads them.
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 2, 2048, 8);
  const Strategy tp4_pp4 = testing::make_strategy(4, 4, 1, false);
  const FrameworkLowered whole = lower_with_framework(scenario, tp4_pp4);
  scenario.framework.scatter_gather_tensors_in_pipeline = true;
  const FrameworkLowered shared = lower_with_framework(scenario, tp4_pp4);
  const auto pipeline = [](const Op& op) { return op.group == GroupKind::pipeline; };
  const auto gathered_on_arrival = [](const Op& op) {
    return op.kind == OpKind::all_gather && op.group == GroupKind::tensor &&
           (op.role == OpRole::pipeline_activation || op.role == OpRole::pipeline_gradient);
  };
  const std::int64_t tensor_bytes = 2048 * scenario.model.hidden_size * 2;
  EXPECT_EQ(count(shared.graph, pipeline), count(whole.graph, pipeline));
  for (const FrameworkLowered* l : {&whole, &shared})
    for (const RankClass& rc : l->graph.classes)
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (pipeline(rc.op(i))) EXPECT_EQ(rc.op(i).bytes, l == &whole ? tensor_bytes : tensor_bytes / 4);
  // One gather of the whole tensor after every receive, and the next op waits for it.
  EXPECT_EQ(count(whole.graph, gathered_on_arrival), 0);
  EXPECT_EQ(count(shared.graph, gathered_on_arrival), count(shared.graph, [](const Op& op) {
              return op.kind == OpKind::recv && op.group == GroupKind::pipeline;
            }));
  for (const RankClass& rc : shared.graph.classes)
    for (OpIndex i = 0; i + 1 < rc.size(); ++i)
      if (rc.op(i).kind == OpKind::recv && rc.op(i).group == GroupKind::pipeline) {
        EXPECT_TRUE(gathered_on_arrival(rc.op(i + 1))) << op_name(rc.op(i));
        EXPECT_EQ(rc.op(i + 1).bytes, tensor_bytes);
      }
  // The engine runs the gathers (what they save depends on the links: on these 400 Gb/s NICs, 8 MB tensors and sends
  // beside the compute, next to nothing; docs/VALIDATION.md has the published rows on Selene).
  EXPECT_GT(iteration_ns(shared), 0);
  // With SP the tensor between stages is already each rank's share: the switch changes nothing.
  const Strategy sp = testing::make_strategy(4, 4);
  EXPECT_EQ(count(lower_with_framework(scenario, sp).graph, gathered_on_arrival), 0);
}

TEST(FrameworkLowering, UnfusedCrossEntropyPassesOverFp32Logits) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);
  const Strategy tp2 = testing::make_strategy(2, 1);
  scenario.framework.cross_entropy_loss_fusion = false;
  const FrameworkLowered unfused = lower_with_framework(scenario, tp2);
  // The loss ops say they are unfused (since 2026-12-03; before, an elementwise op of role loss followed each):
  // their passes are priced as core/unfused_loss.hpp lists them, 38 bytes a logit forward and 14 backward.
  const auto losses = [](const Op& op) { return op.kind == OpKind::loss_forward || op.kind == OpKind::loss_backward; };
  const auto unfused_losses = [&](const Op& op) { return losses(op) && op.unfused_loss; };
  const Strategy& st = unfused.strategy;
  EXPECT_EQ(count(unfused.graph, unfused_losses), 2 * st.num_micro_batches);  // forward and backward
  EXPECT_EQ(count(unfused.graph, [](const Op& op) { return op.kind == OpKind::elementwise && op.role == OpRole::loss; }), 0);
  const RankClass& last = unfused.graph.classes.back();
  for (OpIndex i = 0; i < last.size(); ++i) {
    const Op& loss = last.op(i);
    if (!losses(loss)) continue;
    const std::int64_t logits = loss.rows * loss.cols;
    EXPECT_EQ(memory_bound_bytes(loss), (loss.kind == OpKind::loss_forward ? 38 : 14) * logits) << op_name(loss);
    Op fused = loss;
    fused.unfused_loss = false;
    EXPECT_EQ(memory_bound_bytes(fused), (loss.kind == OpKind::loss_forward ? 2 : 4) * logits) << op_name(loss);
  }
}

// Residual fusion: backward, every layer norm's backward adds the skip path's gradient (the final norm has none)
// and no residual op is left; forward, the row-parallel GEMMs add the stream in their epilogue where no TP
// reduction comes between (TP 1), and a residual op stays after each TP reduction otherwise.
TEST(FrameworkLowering, ResidualFusionFoldsEachResidualAddIntoAKernelThatRunsAnyway) {
  Scenario scenario = testing::make_scenario(testing::llama_shaped(4), 1, 2048, 8);
  const auto residual_ops = [](const Op& op) {
    return op.kind == OpKind::elementwise && (op.role == OpRole::attention_residual || op.role == OpRole::mlp_residual);
  };
  const auto phase_is = [](Phase phase, auto wanted) { return [=](const Op& op) { return op.phase == phase && wanted(op); }; };
  const auto fused_gemms = [](const Op& op) { return op.kind == OpKind::gemm && op.fuses_residual; };
  const auto fused_norms = [](const Op& op) { return op.kind == OpKind::norm_backward && op.fuses_residual; };
  for (const int tp : {1, 2}) {
    SCOPED_TRACE(tp);
    const Strategy strategy = testing::make_strategy(tp, 1, 1, /*sp=*/tp > 1);
    const FrameworkLowered plain = lower_with_framework(scenario, strategy);
    Scenario fused_scenario = scenario;
    fused_scenario.framework.residual_fusion = true;
    const FrameworkLowered fused = lower_with_framework(fused_scenario, strategy);
    const int micro_batches = plain.strategy.num_micro_batches;
    const int layers = 4, classes = static_cast<int>(plain.graph.classes.size());
    EXPECT_EQ(count(plain.graph, residual_ops), 2 * 2 * layers * micro_batches * classes);
    EXPECT_EQ(count(plain.graph, fused_gemms) + count(plain.graph, fused_norms), 0);
    EXPECT_EQ(count(fused.graph, phase_is(Phase::backward, residual_ops)), 0);
    EXPECT_EQ(count(fused.graph, fused_norms), 2 * layers * micro_batches * classes);
    EXPECT_EQ(count(fused.graph, fused_gemms), tp == 1 ? 2 * layers * micro_batches * classes : 0);
    EXPECT_EQ(count(fused.graph, phase_is(Phase::forward, residual_ops)),
              tp == 1 ? 0 : 2 * layers * micro_batches * classes);
    for (const RankClass& rc : fused.graph.classes)
      for (OpIndex i = 0; i < rc.size(); ++i) {
        const Op& op = rc.op(i);
        if (fused_gemms(op)) {
          EXPECT_TRUE(op.role == OpRole::attention_projection || op.role == OpRole::fc2) << op_name(op);
          EXPECT_EQ(op.gemm_pass, GemmPass::forward) << op_name(op);
          EXPECT_EQ(memory_bound_bytes(op), 2.0 * (op.gemm.m * op.gemm.k + op.gemm.k * op.gemm.n + 2 * op.gemm.m * op.gemm.n));
        }
        if (fused_norms(op)) {
          EXPECT_NE(op.role, OpRole::final_norm) << op_name(op);
          EXPECT_EQ(memory_bound_bytes(op), 4.0 * 2 * op.rows * op.cols) << "x, dy and the skip read, dx written";
          EXPECT_NE(kernel_shape_key(op).find(",residual=1"), std::string::npos);
        }
      }
    // Every fused kernel costs a little more than its plain form and less than the two ops it replaces.
    EXPECT_LT(iteration_ns(fused), iteration_ns(plain));
  }
  // A hidden dropout sits between the branch and the add: nothing fuses.
  scenario.model.hidden_dropout = 0.1;
  scenario.framework.residual_fusion = true;
  const FrameworkLowered dropout = lower_with_framework(scenario, testing::make_strategy(1, 1, 1, false));
  EXPECT_EQ(count(dropout.graph, fused_gemms) + count(dropout.graph, fused_norms), 0);
}

TEST(FrameworkLowering, AttentionRunsAsTheBackendSays) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 2048, 8);  // unfused, dropout 0.1
  const Strategy tp2 = testing::make_strategy(2, 1);
  const auto attention = [](const Op& op) {
    return op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward;
  };
  // `dropout_kernel`: unfused attention's separate dropout kernel over the scores. Every backend's attention drops its
  // probabilities here (dropout 0.1), so every key names the dropout variant (fused: the kernel's own draws, priced by
  // cost/attention_dropout.hpp since 2026-11-30).
  const auto check = [&](const FrameworkLowered& l, bool flash, bool dropout_kernel, bool cudnn) {
    for (const RankClass& rc : l.graph.classes)
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (attention(rc.op(i))) {
          EXPECT_EQ(rc.op(i).attention.flash, flash);
          EXPECT_EQ(rc.op(i).attention.dropout, dropout_kernel);
          EXPECT_EQ(rc.op(i).attention.cudnn, cudnn);
          EXPECT_FLOAT_EQ(rc.op(i).dropout, 0.1f);
          EXPECT_NE(kernel_shape_key(rc.op(i)).find(",dropout=1"), std::string::npos);
        }
  };
  check(lower_with_framework(scenario, tp2), false, true, false);
  scenario.model.attention_backend = AttentionBackend::flash;
  check(lower_with_framework(scenario, tp2), true, false, false);
  scenario.model.attention_backend = AttentionBackend::fused;
  check(lower_with_framework(scenario, tp2), true, false, true);
  // Dropout over unfused scores moves 2.5 more passes of the score matrix each way.
  Op forward;
  forward.kind = OpKind::attention_forward;
  forward.attention = {1, 16, 16, 2048, 2048, 128, true, false};
  const double plain = memory_bound_bytes(forward);
  forward.attention.dropout = true;
  EXPECT_DOUBLE_EQ(memory_bound_bytes(forward), plain * (4 + 2.5) / 4);
  // On Hopper the built-in profile prices cuDNN's kernel faster than FlashAttention-2's.
  const GpuSpec h100 = *gpu_preset("H100-SXM-80GB");
  Op flash = forward;
  flash.attention = {1, 32, 8, 4096, 4096, 128, true, true};
  Op cudnn = flash;
  cudnn.attention.cudnn = true;
  EXPECT_LT(compute_time_ns(builtin_profile(), h100, cudnn), 0.6 * compute_time_ns(builtin_profile(), h100, flash));
}

TEST(FrameworkLowering, AllGatherContextParallelismDoesTheRingsAttentionWork) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 8192, 8);
  scenario.model.attention_backend = AttentionBackend::flash;
  const Strategy cp4 = testing::make_strategy(1, 1, 4);
  const FrameworkLowered ring = lower_with_framework(scenario, cp4);
  scenario.framework.cp_comm_type = CpCommType::all_gather;
  const FrameworkLowered gathered = lower_with_framework(scenario, cp4);
  const auto is = [](OpKind kind) {
    return [kind](const Op& op) { return op.kind == kind && op.role == OpRole::cp_exchange; };
  };
  const auto attention_flops = [](const FrameworkLowered& l) {
    double flops = 0;
    for (const RankClass& rc : l.graph.classes)
      for (OpIndex i = 0; i < rc.size(); ++i)
        if (rc.op(i).role == OpRole::core_attention) flops += rc.op(i).flops;
    return flops;
  };
  const int layer_passes = int(scenario.model.num_layers) * gathered.strategy.num_micro_batches *
                           int(gathered.graph.classes.size());
  EXPECT_EQ(count(ring.graph, is(OpKind::all_gather)), 0);
  // One gather per layer forward and one in backward; the key and value gradients reduce-scattered.
  EXPECT_EQ(count(gathered.graph, is(OpKind::all_gather)), 2 * layer_passes);
  EXPECT_EQ(count(gathered.graph, is(OpKind::reduce_scatter)), layer_passes);
  EXPECT_EQ(count(gathered.graph, is(OpKind::send)), 0);
  // Two query chunks of s/2 against the keys before them: the causal work of the ring, no more, no less.
  EXPECT_NEAR(attention_flops(gathered), attention_flops(ring), 1e-9 * attention_flops(ring));
  for (const RankClass& rc : gathered.graph.classes)
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).role == OpRole::core_attention) {
        EXPECT_EQ(rc.op(i).attention.seq_q, 8192 / 4 / 2);
        EXPECT_TRUE(rc.op(i).attention.seq_kv == 4 * 1024 || rc.op(i).attention.seq_kv == 5 * 1024);
      }
  EXPECT_GT(iteration_ns(gathered), 0);
  // The gathered keys and values are held as buffers.
  EXPECT_GT(estimate_memory(gathered.scenario, cp4).per_stage[0].communication_buffers,
            estimate_memory(ring.scenario, cp4).per_stage[0].communication_buffers);
}

// Context parallelism's ring (p2p) as Transformer Engine runs it: forward, exchange k passes the key-value block of
// step k on while block k computes; backward, the gradient travels one step behind the block, so exchange k waits
// for block k - 1, and a last exchange brings each rank's completed gradient home before the layer goes on.
TEST(FrameworkLowering, TheRingCarriesKeyValueGradientsOneStepBehind) {
  Scenario scenario = testing::make_scenario(testing::gpt_shaped(), 1, 8192, 8);
  const int cp = 4;
  const FrameworkLowered l = lower_with_framework(scenario, testing::make_strategy(1, 1, cp));
  const RankClass& rc = l.graph.classes.at(0);
  const auto depends = [&](OpIndex first, OpIndex then) {
    for (auto [e, end] = boost::in_edges(then, rc.graph); e != end; ++e)
      if (boost::source(*e, rc.graph) == first) return true;
    return false;
  };
  const auto ring_ops = [&](Phase phase, OpKind kind) {  // layer 0, micro-batch 0: attention, sends or elementwise
    std::vector<OpIndex> ops;
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      const OpKind k = op.kind == OpKind::attention_backward ? OpKind::attention_forward : op.kind;
      if (op.layer == 0 && op.micro_batch == 0 && op.phase == phase && !op.recomputed && op.ring_step >= 0 && k == kind)
        ops.push_back(i);
    }
    return ops;
  };
  const std::vector<OpIndex> forward_sends = ring_ops(Phase::forward, OpKind::send);
  const std::vector<OpIndex> forward_blocks = ring_ops(Phase::forward, OpKind::attention_forward);
  const std::vector<OpIndex> merges = ring_ops(Phase::forward, OpKind::elementwise);
  const std::vector<OpIndex> sends = ring_ops(Phase::backward, OpKind::send);
  const std::vector<OpIndex> blocks = ring_ops(Phase::backward, OpKind::attention_forward);
  const std::vector<OpIndex> adds = ring_ops(Phase::backward, OpKind::elementwise);
  ASSERT_EQ(forward_sends.size(), std::size_t(cp - 1));
  ASSERT_EQ(forward_blocks.size(), std::size_t(cp));
  ASSERT_EQ(merges.size(), std::size_t(cp));   // each block folded into the output by an op of its own
  ASSERT_EQ(sends.size(), std::size_t(cp + 1));
  ASSERT_EQ(blocks.size(), std::size_t(cp));
  ASSERT_EQ(adds.size(), std::size_t(cp - 1));  // from step 2 on, this rank's share joins what arrived
  const Bytes kv = rc.op(forward_sends[0]).bytes;
  for (int k = 0; k < cp; ++k) {
    EXPECT_EQ(rc.op(forward_blocks[k]).ring_step, k);
    EXPECT_EQ(merges[k], forward_blocks[k] + 1) << "merge " << k << " follows its block";
    EXPECT_GT(rc.op(merges[k]).bytes, 0);
    EXPECT_EQ(rc.op(blocks[k]).ring_step, k);
    if (k > 0) EXPECT_TRUE(depends(forward_sends[k - 1], forward_blocks[k])) << "forward block " << k;
    if (k > 0) EXPECT_TRUE(depends(sends[k - 1], blocks[k])) << "backward block " << k;
  }
  for (int k = 0; k <= cp; ++k) {
    EXPECT_EQ(rc.op(sends[k]).ring_step, k);
    // The block onward with the gradient behind it, but the first (no gradient yet) and the last two (no block).
    EXPECT_EQ(rc.op(sends[k]).bytes, (k >= 1 && k <= cp - 2 ? 2 : 1) * kv) << "exchange " << k;
    if (k == 1) EXPECT_TRUE(depends(blocks[0], sends[1])) << "exchange 1 waits for block 0";
    if (k >= 2) {  // the gradient add after block k - 1, once exchange k - 1 brought what it adds to
      const OpIndex add = adds[k - 2];
      EXPECT_EQ(rc.op(add).ring_step, k);
      EXPECT_EQ(add, blocks[k - 1] + 1);
      EXPECT_TRUE(depends(sends[k - 1], add)) << "add " << k;
      EXPECT_TRUE(depends(add, sends[k])) << "exchange " << k << " waits for its gradient";
      EXPECT_EQ(rc.op(add).bytes, 3 * kv);
    }
  }
  EXPECT_TRUE(depends(sends[cp], sends[cp] + 1)) << "the layer goes on once the gradient is home";
  EXPECT_GT(iteration_ns(l), 0);
}

}  // namespace
}  // namespace twin
