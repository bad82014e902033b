// The memory model's terms as issue 37 corrected them, one test each: the logits the loss keeps (fused: bf16, the
// gradient written over them; unfused: fp32), the layer a full recompute runs again in its backward, and
// Nemotron-4 340B as NVIDIA's NeMo configurations run it on 80 GB H100s (scenarios/nemotron4-340b-256xH100.json).
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "strategies/memory.hpp"
#include "strategies/search.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

constexpr std::int64_t kSeq = 2048;

// One stage on two GPUs of TP with SP: the output layer keeps the final norm's and the projection's inputs (bf16,
// the rank's tokens) and the logits of its vocabulary shard for every token of the micro-batch.
TEST(LossLogits, FusedLossKeepsBf16LogitsAndUnfusedFp32) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 1, kSeq, 8);
  const double rows = 2.0 * kSeq;  // micro-batch 2
  const std::int64_t vocab_shard = 32000 / 2, inputs = 2 * 2 * (2 * kSeq / 2) * 1024;
  EXPECT_EQ(output_layer_activation_bytes(sc, rows, 2, true), inputs + 2 * 2 * kSeq * vocab_shard);
  sc.framework.cross_entropy_loss_fusion = false;
  EXPECT_EQ(output_layer_activation_bytes(sc, rows, 2, true), inputs + 4 * 2 * kSeq * vocab_shard);
}

TEST(LossLogits, TheEstimateHoldsTheFusedLossLogits) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 1, kSeq, 8);
  Strategy st = testing::make_strategy(2, 1);
  st.data_parallel_size = 4;
  st.num_micro_batches = 2;
  const Bytes fused = estimate_memory(sc, st).per_stage[0].activations;
  sc.framework.cross_entropy_loss_fusion = false;
  // The fp32 copy's 2 more bytes a logit, and while the loss runs a bf16 tensor beside it (the logits forward, their
  // gradient backward: output_layer_held_bytes, since 2026-12-03, as twin execute's peaks measured): 2 more.
  EXPECT_EQ(output_layer_held_bytes(sc, 2.0 * kSeq, 2, true), 2 * 2 * kSeq * (32000 / 2));
  EXPECT_EQ(estimate_memory(sc, st).per_stage[0].activations - fused, 4 * kSeq * (32000 / 2));
  sc.framework.cross_entropy_loss_fusion = true;
  EXPECT_EQ(output_layer_held_bytes(sc, 2.0 * kSeq, 2, true), 0);
}

// Full recompute keeps each layer's input; while a layer's backward runs, its forward has run again and holds an
// unrecomputed layer's tensors beside them (less the input, counted once).
TEST(FullRecompute, TheLayerInItsBackwardHoldsItsForwardAgain) {
  const ModelConfig m = testing::llama_shaped(8);
  const Bytes none = activation_bytes_per_layer(m, kSeq, 1, 2, true, 1, Recompute::none);
  const Bytes full = activation_bytes_per_layer(m, kSeq, 1, 2, true, 1, Recompute::full);
  EXPECT_EQ(full, 2 * kSeq * 1024 / 2);
  EXPECT_EQ(recomputed_layer_bytes(m, kSeq, 1, 2, true, 1), none - full);
}

// A layer's backward holds, beside its saved tensors, the gradients of its MLP's activation step: the layer output's
// (the rank's tokens under SP), the activation output's and fc1's output's (SwiGLU: two ffn wide), each 1/tp wide.
TEST(LayerBackward, HoldsTheOutputActivationAndFc1Gradients) {
  const ModelConfig m = testing::llama_shaped(8);
  const std::int64_t tokens = 2 * kSeq;  // micro-batch 2
  EXPECT_EQ(layer_backward_gradient_bytes(m, kSeq, 2, 2, true, 1),
            2 * (tokens / 2 * 1024 + tokens * 2816 / 2 + tokens * 2 * 2816 / 2));
  EXPECT_EQ(layer_backward_gradient_bytes(m, kSeq, 2, 1, false, 1), 2 * (tokens * 1024 + tokens * 3 * 2816));
}

TEST(FullRecompute, TheEstimateAddsOneRecomputedLayerToTheInFlightInputs) {
  // A middle stage of 1F1B (no embedding, no logits): p - s passes of two stored layer inputs, then one layer
  // recomputed during the first backward, with its gradients.
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 4, kSeq, 32);
  Strategy st = testing::make_strategy(2, 4);
  st.data_parallel_size = 4;
  st.num_micro_batches = 8;
  st.recompute = Recompute::full;
  const Bytes stored = activation_bytes_per_layer(sc.model, kSeq, 1, 2, true, 1, Recompute::full);
  const Bytes recomputed = recomputed_layer_bytes(sc.model, kSeq, 1, 2, true, 1);
  const Bytes gradients = layer_backward_gradient_bytes(sc.model, kSeq, 1, 2, true, 1);
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations, (4 - 1) * 2 * stored + recomputed + gradients);
  st.recompute = Recompute::selective;  // nothing is run again beyond core attention, which keeps no more
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations,
            (4 - 1) * 2 * activation_bytes_per_layer(sc.model, kSeq, 1, 2, true, 1, Recompute::selective) +
                gradients);
}

// On the last stage the output layer's backward runs first and its logits are gone (the loss wrote their gradient
// over them, the projection's backward consumed it) before any layer runs again: a fully recomputed layer's forward
// and gradients stand in for the logits, not beside them (twin execute and Megatron alike).
TEST(FullRecompute, TheLogitsAreFreedBeforeTheFirstLayerRunsAgain) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(2), 1, kSeq, 1);
  sc.model.vocab_size = 256000;  // logits far larger than a layer
  Strategy st = testing::make_strategy(1, 1);
  st.num_micro_batches = 1;
  st.recompute = Recompute::full;
  const double rows = kSeq;
  const Bytes stored = activation_bytes_per_layer(sc.model, kSeq, 1, 1, false, 1, Recompute::full);
  const Bytes in_flight = embedding_activation_bytes(sc, rows, 1, false) + 2 * stored +
                          output_layer_activation_bytes(sc, rows, 1, false);
  const Bytes held = recomputed_layer_bytes(sc.model, kSeq, 1, 1, false, 1) +
                     layer_backward_gradient_bytes(sc.model, kSeq, 1, 1, false, 1);
  ASSERT_GT(output_layer_activation_bytes(sc, rows, 1, false), held);
  EXPECT_EQ(estimate_memory(sc, st).per_stage[0].activations, in_flight);  // the forward's end is the peak
}

// Nemotron-4 340B (NeMo's recommended bf16 configuration: 256 H100s, TP 8, PP 8, VP 12, micro-batch 1, global
// batch 64, selective recompute, distributed optimizer, bf16 gradients): the first stage holds 12 layers and the
// embedding of 340B parameters, 103 layer-passes of activations in flight (Megatron's interleaved warm-up,
// (8 - 1) * 2 + (12 - 1) * 8, and one more forward in the steady state) and fits in 80 GB.
Scenario nemotron4_340b() {
  return load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/nemotron4-340b-256xH100.json");
}

Strategy completed(const Scenario& scenario) {
  Strategy st = *scenario.strategy;
  EXPECT_FALSE(complete_strategy(scenario, st).has_value());
  EXPECT_FALSE(invalid_reason(scenario, st).has_value());
  return st;
}

TEST(Nemotron4_340B, NvidiasBf16ConfigurationFitsIn80GB) {
  const Scenario sc = nemotron4_340b();
  const Strategy st = completed(sc);
  ASSERT_EQ(st.data_parallel_size, 4);
  ASSERT_EQ(st.num_micro_batches, 16);
  const MemoryEstimate memory = estimate_memory(sc, st);
  EXPECT_EQ(uniform_out_of_memory_reason(sc, st, memory), "");
  // Model states: bf16 weights and gradients, fp32 master and moments over the 4 data-parallel ranks.
  const MemoryBreakdown& first = memory.per_stage.front();
  const double params = static_cast<double>(stage_parameters_per_rank(sc.model, st, 0).total());
  EXPECT_NEAR(static_cast<double>(first.parameters + first.gradients + first.optimizer_states), params * (2 + 2 + 3),
              4.0);
  const Bytes layer = activation_bytes_per_layer(sc.model, 4096, 1, 8, true, 1, Recompute::selective);
  const Bytes embedding = embedding_activation_bytes(sc, 4096, 8, true);
  // Stage 0 runs chunk 0 (embedding and layer 0) in 16 of its first 103 forwards; the first backward then holds its
  // layer's gradients beside them.
  EXPECT_EQ(first.activations,
            103 * layer + 16 * embedding + layer_backward_gradient_bytes(sc.model, 4096, 1, 8, true, 1));
}

// The same on 128 H100s (global batch 32: the NeMo 24.07 performance summary's row, which ran in FP8): in bf16 its
// data-parallel group of 2 leaves 6 bytes of optimizer state per parameter, and the first stage's 5.8 B parameters
// and 103 layer-passes alone come to more than CUDA hands out on an H100 (cuDeviceTotalMem: 85,017,493,504 bytes,
// measured on the device machine on 2026-11-28), before NCCL, the CUDA context and the userbuffers.
TEST(Nemotron4_340B, TheFp8RowOn128GpusDoesNotFitInBf16) {
  Scenario sc = nemotron4_340b();
  sc.cluster.node_groups.front().count = 16;
  sc.training.global_batch_size = 32;
  const Strategy st = completed(sc);
  ASSERT_EQ(st.data_parallel_size, 2);
  const MemoryEstimate memory = estimate_memory(sc, st);
  EXPECT_NE(uniform_out_of_memory_reason(sc, st, memory), "");
  const MemoryBreakdown& first = memory.per_stage.front();
  constexpr Bytes kCudaTotalOnH100 = 85017493504;
  EXPECT_GT(first.parameters + first.gradients + first.optimizer_states + first.activations, kCudaTotalOnH100);
}

// The same 128 H100s in bf16 as NVIDIA's DGX Cloud Benchmarking ran it (v24.11.1, nemotron/README_340b.md: 4.61 s per
// step; the row dgxc_nemotron4_340b_128gpu_2411 of the validation table): NeMo's distributed_fused_adam keeps the
// fp32 master weights as 16-bit remainders of the bf16 parameters, 10 bytes of optimizer state per parameter over
// the data-parallel group where Megatron's distributed optimizer keeps 12: 5.8 B parameters x 1 byte less at DP 2.
TEST(Nemotron4_340B, NeMosRemaindersFitThe128GpuRowInBf16) {
  Scenario sc = nemotron4_340b();
  sc.cluster.node_groups.front().count = 16;
  sc.training.global_batch_size = 32;
  const Strategy st = completed(sc);
  const MemoryEstimate whole_master = estimate_memory(sc, st);
  sc.training.optimizer_precision.store_param_remainders = true;
  const MemoryEstimate memory = estimate_memory(sc, st);
  EXPECT_EQ(uniform_out_of_memory_reason(sc, st, memory), "");
  const double params = static_cast<double>(stage_parameters_per_rank(sc.model, st, 0).total());
  EXPECT_NEAR(static_cast<double>(whole_master.per_stage.front().optimizer_states -
                                  memory.per_stage.front().optimizer_states),
              params * 2 / 2, 4.0);
}

}  // namespace
}  // namespace twin
