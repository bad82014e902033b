// Per-layer plans: every layout's rows on each GPU, the lowering of a one-strategy plan against the uniform
// lowering op for op, layout changes and Ulysses all-to-alls in the graph, memory against estimate_memory.
#include <gtest/gtest.h>

#include "sim/simulate.hpp"
#include "strategies/lowering.hpp"
#include "strategies/per_layer/per_layer_edges.hpp"
#include "strategies/per_layer/per_layer.hpp"
#include "strategies/validity.hpp"
#include "tests/strategies/per_layer/per_layer_fixture.hpp"
#include "tests/strategies/strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::llama_shaped;
using testing::make_scenario;
using testing::per_layer_plan;

TEST(PerLayerBlocks, EveryLayoutHoldsTheSameRowsOnEachGpu) {
  const std::int64_t seq = 1024;
  for (int gpus : {1, 2, 4, 8})
    for (int smb : {gpus, 2 * gpus, 3 * gpus})
      for (int group = 1; group <= gpus; group *= 2) {
        const std::int64_t per_gpu = smb * seq / gpus;
        for (bool ulysses : {false, true})
          for (int gpu = 0; gpu < gpus; ++gpu) {
            const BlockSamples block = block_samples({group, ulysses}, gpus, smb, gpu);
            EXPECT_EQ(block.count * seq, group * per_gpu);  // the block's rows, cut into `group` runs
            EXPECT_EQ(block.first * seq + gpu % group * per_gpu, gpu * per_gpu)
                << gpus << " GPUs, micro-batch " << smb << ", group " << group << ", GPU " << gpu;
          }
      }
  // Two samples over a block of one GPU of 4: half a sample, which no layout holds.
  EXPECT_THROW(block_samples({1, false}, 4, 2, 0), std::invalid_argument);
  EXPECT_EQ(block_samples({2, false}, 4, 2, 3).first, 1);
}

// The embedding and the output layer beside a layer hold the rows the layer holds on each GPU: beside a Ulysses
// layer the GPU's shard of its Ulysses block, half a sample where two samples fill a block of four GPUs (DeepSpeed-
// Ulysses' sequence shard); beside a Megatron layer its TP block's samples whole.
TEST(PerLayerBlocks, EdgesBesideEachLayoutCutTheLayersRows) {
  const std::int64_t seq = 1024;
  for (int gpus : {1, 2, 4, 8})
    for (int smb : {1, 2, gpus, 3 * gpus})
      for (int group = 1; group <= gpus; group *= 2) {
        if (smb * group % gpus != 0) continue;  // no layout of this group holds whole samples
        const std::int64_t per_gpu = smb * seq / gpus;
        for (bool ulysses : {false, true})
          for (int gpu = 0; gpu < gpus; ++gpu) {
            const EdgeRows rows = edge_rows({group, ulysses}, gpus, smb, gpu);
            const std::int64_t run = rows.block.count * seq / rows.shards;  // rows the edge reads
            EXPECT_EQ(run, ulysses ? per_gpu : group * per_gpu);
            EXPECT_EQ(rows.block.first * seq + rows.shard * run, ulysses ? gpu * per_gpu : gpu / group * run)
                << gpus << " GPUs, micro-batch " << smb << ", group " << group << ", GPU " << gpu;
          }
      }
  const EdgeRows half = edge_rows({4, true}, 4, 2, 3);  // GPU 3: sample 1's second half
  EXPECT_EQ(half.block.first, 0);
  EXPECT_EQ(half.block.count, 2);
  EXPECT_EQ(half.shard, 3);
  EXPECT_EQ(half.shards, 4);
  EXPECT_THROW(edge_rows({4, false}, 8, 1, 0), std::invalid_argument);  // half a sample per TP block
}

TEST(PerLayerLowering, OneStrategyPlanEmitsTheUniformOps) {
  Scenario sc = make_scenario(llama_shaped(8), 1, 1024, 16);
  sc.framework.main_grad_dtype_bytes = 4;  // fp32 main gradients: the optimizer step reads them so in both
  Strategy st = testing::make_strategy(2, 2);
  st.zero_stage = 1;
  st.recompute = Recompute::full;
  ASSERT_FALSE(complete_strategy(sc, st));
  // tp 2 of 4 stage GPUs, 1 sample per data rank: 2 samples per stage micro-batch.
  const LayerStrategy ls{{2, false}, 1, Recompute::full};
  const PerLayerPlan plan = per_layer_plan(2, 2, st.num_micro_batches, {4, 4}, std::vector<LayerStrategy>(8, ls));
  const IterationGraph uniform = lower_to_op_graphs(sc, st);
  const IterationGraph mine = lower_per_layer_plan(sc, plan);
  ASSERT_EQ(uniform.classes.size(), mine.classes.size());
  for (std::size_t c = 0; c < uniform.classes.size(); ++c) {
    const RankClass& a = uniform.classes[c];
    const RankClass& b = mine.classes[c];
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(boost::num_edges(a.graph), boost::num_edges(b.graph));
    EXPECT_EQ(a.first_rank, b.first_rank);
    for (OpIndex i = 0; i < a.size(); ++i) {
      const Op& x = a.op(i);
      const Op& y = b.op(i);
      ASSERT_EQ(op_name(x), op_name(y)) << i;
      EXPECT_EQ(x.kind, y.kind);
      EXPECT_EQ(x.stream, y.stream);
      EXPECT_EQ(x.micro_batch, y.micro_batch);
      EXPECT_EQ(x.bytes, y.bytes) << op_name(x);
      EXPECT_EQ(x.group_size, y.group_size);
      EXPECT_EQ(x.gemm.m, y.gemm.m);
      EXPECT_EQ(x.gemm.n, y.gemm.n);
      EXPECT_EQ(x.gemm.k, y.gemm.k);
      EXPECT_EQ(x.rows, y.rows);
      EXPECT_EQ(x.elements, y.elements);
      EXPECT_EQ(x.main_gradient_bytes, y.main_gradient_bytes) << op_name(x);
      if (x.kind == OpKind::optimizer_step) EXPECT_EQ(y.main_gradient_bytes, 4);
      EXPECT_EQ(x.p2p_tag, y.p2p_tag);
    }
  }
  const MemoryEstimate u = estimate_memory(sc, st), p = estimate_per_layer_memory(sc, plan);
  for (int stage = 0; stage < 2; ++stage) EXPECT_EQ(u.per_stage[stage].total(), p.per_stage[stage].total());
}

TEST(PerLayerLowering, LayoutChangesAddNoOpAndTheEngineRunsBothGroups) {
  const Scenario sc = make_scenario(llama_shaped(8), 1, 1024, 16);
  std::vector<LayerStrategy> layers(4, LayerStrategy{{2, false}, 1, Recompute::none});
  layers.resize(8, LayerStrategy{{8, false}, 0, Recompute::none});
  const PerLayerPlan plan = per_layer_plan(1, 8, 2, {8}, layers);
  const IterationGraph graph = lower_per_layer_plan(sc, plan);
  const RankClass& rc = graph.classes[0];
  int all_to_alls = 0, tp2 = 0, tp8 = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    all_to_alls += op.kind == OpKind::all_to_all;
    if (op.group == GroupKind::tensor) (op.group_size == 2 ? tp2 : tp8)++;
    if (op.group == GroupKind::tensor && op.layer >= 0) EXPECT_EQ(op.group_size, op.layer < 4 ? 2 : 8) << op_name(op);
  }
  EXPECT_EQ(all_to_alls, 0);
  EXPECT_GT(tp2, 0);
  EXPECT_GT(tp8, 0);
  EXPECT_GT(simulate_iteration(graph, sc.cluster, builtin_profile()).iteration_ns, 0);
}

TEST(PerLayerLowering, UlyssesLayersSwapSequenceForHeadsAroundAttention) {
  const Scenario sc = make_scenario(llama_shaped(2), 1, 1024, 8);
  const PerLayerPlan plan = per_layer_plan(1, 4, 2, {2}, std::vector<LayerStrategy>(2, {{4, true}, 3, Recompute::none}));
  const RankClass rc = lower_per_layer_plan(sc, plan).classes[0];
  // Per layer and micro-batch: Q,K,V and output forward, their gradients backward.
  const std::int64_t local = 4 * 1024 / 8, qkv = (16 + 2 * 4) * 64, q = 16 * 64;
  int qkv_count = 0, q_count = 0, gathers = 0;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.kind == OpKind::all_to_all) {
      EXPECT_EQ(op.group_size, 4);
      (op.bytes == local * qkv * 2 ? qkv_count : q_count)++;
      if (op.bytes != local * qkv * 2) EXPECT_EQ(op.bytes, local * q * 2);
    }
    if (op.role == OpRole::param_gather && op.layer >= 0) {
      EXPECT_EQ(op.group_size, 8);  // weights whole, ZeRO-3 over the whole stage
      ++gathers;
    }
    if (op.kind == OpKind::gemm && op.role == OpRole::fc1 && op.phase == Phase::forward) EXPECT_EQ(op.gemm.m, local);
  }
  EXPECT_EQ(qkv_count, 2 * 2 * 2);
  EXPECT_EQ(q_count, 2 * 2 * 2);
  EXPECT_GT(gathers, 0);
  EXPECT_GT(simulate_iteration(lower_per_layer_plan(sc, plan), sc.cluster, builtin_profile()).iteration_ns, 0);
}

}  // namespace
}  // namespace twin
