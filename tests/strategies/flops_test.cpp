// Megatron's FLOP formula and MFU/HFU on a hand-computed example.
#include <gtest/gtest.h>

#include "strategies/flops.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

// 2 layers, h 1024, 8 heads of 128, GeLU MLP of 4096, vocabulary 1000, seq 1024, 8 sequences.
Scenario tiny() {
  ModelConfig m = testing::llama_shaped(2);
  m.num_attention_heads = 8;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  m.ffn_hidden_size = 4096;
  m.activation = Activation::gelu;
  m.vocab_size = 1000;
  Scenario sc = testing::make_scenario(m, 1, 1024, 8);
  sc.cluster.node_groups[0].gpu.peak_bf16_tflops = 1000;
  return sc;
}

TEST(Flops, HandComputedModelFlops) {
  // Per token, forward: layer GEMMs 2*(1024*24*128 + 1024*1024 + 2*1024*4096) = 25,165,824,
  // causal attention 2*1024*8*128 = 2,097,152, per layer; logits 2*1024*1000 = 2,048,000.
  // (2 * 27,262,976 + 2,048,000) * 3 passes * 8192 tokens.
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(tiny()), 1390361444352.0);
  EXPECT_DOUBLE_EQ(hardware_flops_per_iteration(tiny(), Recompute::none), 1390361444352.0);
  EXPECT_DOUBLE_EQ(hardware_flops_per_iteration(tiny(), Recompute::selective), 1390361444352.0 + 34359738368.0);
  EXPECT_DOUBLE_EQ(hardware_flops_per_iteration(tiny(), Recompute::full), 1390361444352.0 + 446676598784.0);
}

TEST(Flops, MfuOnEightGpus) {
  Strategy st = testing::make_strategy(2, 1);
  st.data_parallel_size = 4;
  st.recompute = Recompute::selective;
  const Throughput t = throughput(tiny(), st, 1e-3);
  EXPECT_DOUBLE_EQ(t.tokens_per_s, 8192 / 1e-3);
  EXPECT_NEAR(t.mfu, 0.173795180544, 1e-12);     // 1.390e12 / (1 ms * 8 * 1e15)
  EXPECT_NEAR(t.hfu, 0.17809014784, 1e-12);
}

TEST(Flops, MoeCountsTopKExperts) {
  Scenario dense = tiny();
  Scenario moe = tiny();
  moe.model.moe.num_experts = 8;
  moe.model.moe.top_k = 2;
  moe.model.moe.ffn_hidden_size = 4096;
  // Two experts per token replace the MLP (twice its work), plus the router h*E.
  const double mlp_per_token = 2.0 * 2 * 1024 * 4096;
  const double router_per_token = 2.0 * 1024 * 8;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(moe) - model_flops_per_iteration(dense),
                   3 * 2 * (mlp_per_token + router_per_token) * 8192);
}

TEST(Flops, Fp8TrainingIsMeasuredAgainstTheFp8PeakWhereTheGpuHasOne) {
  Scenario sc = tiny();
  sc.cluster.node_groups[0].gpu.peak_fp8_tflops = 2000;
  EXPECT_DOUBLE_EQ(gpu_peak_flops(sc, sc.cluster.node_groups[0].gpu), 1000e12);
  EXPECT_EQ(peak_precision_text(sc), "dense bf16");
  sc.training.fp8 = Fp8Config{};
  EXPECT_DOUBLE_EQ(gpu_peak_flops(sc, sc.cluster.node_groups[0].gpu), 2000e12);
  EXPECT_DOUBLE_EQ(peak_flops_of_first_gpus(sc, 8), 8 * 2000e12);
  EXPECT_EQ(peak_precision_text(sc), "dense FP8");
  Strategy st = testing::make_strategy(2, 1);
  st.data_parallel_size = 4;
  EXPECT_NEAR(throughput(sc, st, 1e-3).mfu, 0.173795180544 / 2, 1e-12);
  sc.cluster.node_groups[0].gpu.peak_fp8_tflops = 0;  // a GPU without FP8 tensor cores: its bf16 peak
  EXPECT_DOUBLE_EQ(gpu_peak_flops(sc, sc.cluster.node_groups[0].gpu), 1000e12);
  EXPECT_EQ(peak_precision_text(sc), "dense bf16");
}

}  // namespace
}  // namespace twin
