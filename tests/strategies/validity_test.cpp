// Validity rules and completion: each broken rule gives its exact explanation.
#include <gtest/gtest.h>

#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::make_scenario;
using testing::make_strategy;

std::optional<std::string> reason(const Scenario& sc, Strategy st) {
  if (auto r = complete_strategy(sc, st)) return r;
  return invalid_reason(sc, st);
}

TEST(Validity, CompletesDataParallelAndMicroBatches) {
  const Scenario sc = make_scenario(testing::llama_shaped(), 4, 2048, 256);  // 32 GPUs
  Strategy st = make_strategy(2, 4);
  st.micro_batch_size = 2;
  ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
  EXPECT_EQ(st.data_parallel_size, 4);
  EXPECT_EQ(st.num_micro_batches, 32);
  EXPECT_TRUE(st.sequence_parallel);
  Strategy no_tp = make_strategy(1, 4, 1, true);
  ASSERT_EQ(complete_strategy(sc, no_tp), std::nullopt);
  EXPECT_FALSE(no_tp.sequence_parallel);
  EXPECT_EQ(invalid_reason(sc, st), std::nullopt);
}

TEST(Validity, CompletionErrors) {
  const Scenario sc = make_scenario(testing::llama_shaped(), 3, 2048, 100);  // 24 GPUs
  Strategy st = make_strategy(4, 4);
  EXPECT_EQ(complete_strategy(sc, st), "world size 24 not divisible by tensor*pipeline*context 16");
  Strategy ok_world = make_strategy(2, 4);  // dp 3, micro-batch 1: 100 % 3 != 0
  EXPECT_EQ(complete_strategy(sc, ok_world), "global_batch_size 100 not divisible by micro_batch_size*data_parallel_size 3");
}

TEST(Validity, HeadsNotDivisible) {
  ModelConfig m = testing::llama_shaped();
  m.num_attention_heads = 32;
  m.num_query_groups = 32;
  m.kv_channels = 32;
  const Scenario sc = make_scenario(m, 3, 2048, 96);  // 24 GPUs: tp 3 x dp 8
  EXPECT_EQ(reason(sc, make_strategy(3, 1)), "num_attention_heads 32 not divisible by tensor_model_parallel_size 3");
}

TEST(Validity, EveryRuleExplains) {
  const Scenario sc = make_scenario(testing::llama_shaped(8), 2, 2048, 64);  // 16 GPUs, 16 heads, 4 groups
  EXPECT_EQ(reason(sc, make_strategy(8, 1)), "num_query_groups 4 not divisible by tensor_model_parallel_size 8");
  EXPECT_EQ(reason(sc, make_strategy(1, 16)),
            "num_layers 8 not divisible by pipeline_model_parallel_size*virtual_pipeline_model_parallel_size 16"
            " (an uneven split may only shorten the first and last virtual stage by one layer each)");
  EXPECT_EQ(reason(sc, make_strategy(2, 2, 1, true, 2)),
            "virtual_pipeline_model_parallel_size 2 needs the interleaved-1f1b schedule, not 1f1b");
  EXPECT_EQ(reason(sc, make_strategy(2, 1, 1, true, 1, Schedule::interleaved_1f1b)),
            "interleaved-1f1b needs pipeline_model_parallel_size > 1");
  Strategy few = make_strategy(1, 8);
  few.micro_batch_size = 16;  // dp 2, 64 / 32 = 2 micro-batches < 8 stages
  EXPECT_EQ(reason(sc, few), "num_micro_batches 2 is fewer than pipeline_model_parallel_size 8: stages would sit idle");
  Strategy inter = make_strategy(1, 4, 1, true, 2, Schedule::interleaved_1f1b);
  inter.micro_batch_size = 2;  // dp 4, 64 / 8 = 8 micro-batches: fine
  EXPECT_EQ(reason(sc, inter), std::nullopt);
  inter.micro_batch_size = 16;  // dp 4: 1 micro-batch
  EXPECT_EQ(reason(sc, inter), "interleaved-1f1b needs num_micro_batches 1 divisible by pipeline_model_parallel_size 4");
  Strategy ep = make_strategy(1, 1);
  ep.expert_model_parallel_size = 2;
  EXPECT_EQ(reason(sc, ep), "expert_model_parallel_size 2 needs a MoE model (num_experts > 0)");
  Strategy ds = make_strategy(2, 2, 1, true, 1, Schedule::double_strand);
  EXPECT_EQ(reason(sc, ds), std::nullopt);
  // With nothing to hide the strands only share the GPU (the engine predicts no gain): valid, so that one GPU can
  // run and measure it.
  EXPECT_EQ(reason(sc, make_strategy(1, 2, 1, true, 1, Schedule::double_strand)), std::nullopt);
  Strategy ds_zero3 = ds;
  ds_zero3.zero_stage = 3;
  EXPECT_EQ(reason(sc, ds_zero3),
            "double-strand with zero_stage 3 is not modelled: the two strands run different layers at once, which "
            "would need two layers' weights gathered (DHeLlam uses ZeRO-1)");
  const Scenario twelve_layers = make_scenario(testing::llama_shaped(12), 2, 2048, 64);
  EXPECT_EQ(reason(twelve_layers, make_strategy(2, 4, 1, true, 1, Schedule::double_strand)),
            "double-strand needs num_layers 12 divisible by 2*pipeline_model_parallel_size 8: the model is folded, "
            "each stage holds a run of layers and its mirror of equal length");
  EXPECT_EQ(reason(twelve_layers, make_strategy(2, 2, 1, true, 1, Schedule::double_strand)), std::nullopt);
  Strategy zero = make_strategy(2, 2);
  zero.zero_stage = 4;
  EXPECT_EQ(reason(sc, zero), "zero_stage 4 is not one of 0, 1, 2, 3");
  const Scenario odd_seq = make_scenario(testing::llama_shaped(8), 2, 2050, 64);
  EXPECT_EQ(reason(odd_seq, make_strategy(1, 1, 2)), "seq_length 2050 not divisible by 2*context_parallel_size 4");
}

TEST(Validity, TensorParallelStaysInsideANode) {
  ModelConfig m = testing::llama_shaped();
  m.num_query_groups = 16;
  const Scenario sc = make_scenario(m, 4, 2048, 64);
  EXPECT_EQ(reason(sc, make_strategy(16, 1)),
            "tensor_model_parallel_size 16 exceeds the 8 GPUs of an NVLink domain (gpus_per_node, or "
            "nvlink_domain_gpus): tensor-parallel collectives sit on the critical path of every layer and would cross "
            "the inter-node network (Megatron allows it; it never pays)");
  // An NVLink domain of two nodes (an NVL72 rack's switch system) holds a TP group of 16.
  Scenario rack = sc;
  rack.cluster.node_groups.front().nvlink_domain_gpus = 16;
  EXPECT_FALSE(reason(rack, make_strategy(16, 1)).has_value());
}

TEST(Validity, MixtureOfExperts) {
  const Scenario sc = make_scenario(testing::moe_shaped(), 2, 2048, 64);  // 8 experts, 16 GPUs
  Strategy ep3 = make_strategy(1, 1);
  ep3.expert_model_parallel_size = 3;
  EXPECT_EQ(reason(sc, ep3), "num_experts 8 not divisible by expert_model_parallel_size 3");
  Strategy ep8 = make_strategy(2, 1);
  ep8.expert_model_parallel_size = 8;
  EXPECT_EQ(reason(sc, ep8), std::nullopt);
  ep8.sequence_parallel = false;
  EXPECT_EQ(reason(sc, ep8),
            "MoE with tensor_model_parallel_size > 1 needs sequence_parallel: experts are not tensor-parallel, so "
            "each TP rank must route its own share of the tokens");
}

// Uniform strategies run on mixed clusters (each stage at its slowest GPU's pace); TP must fit the
// smallest node.
TEST(Validity, HeterogeneousClusterTakesUniformStrategiesThatFitEveryNode) {
  Scenario sc = make_scenario(testing::llama_shaped(), 1, 2048, 64);
  sc.cluster.node_groups.push_back(sc.cluster.node_groups.front());
  sc.cluster.node_groups.back().gpus_per_node = 4;
  sc.cluster.node_groups.back().count = 2;
  EXPECT_EQ(reason(sc, make_strategy(2, 1)), std::nullopt);
  EXPECT_NE(reason(sc, make_strategy(8, 1)), std::nullopt);
}

}  // namespace
}  // namespace twin
