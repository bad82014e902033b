// The memory model against closed forms: Korthikanti et al. 2022's per-layer activations for a
// GPT-shaped layer (every variant of TP, SP and recompute), 16 bytes per parameter with ZeRO sharding,
// activations in flight per schedule, and the out-of-memory message.
#include <cmath>
#include <utility>

#include <gtest/gtest.h>

#include "strategies/memory.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::gpt_shaped;

constexpr std::int64_t s = 2048, b = 2, h = 2048, a = 16;

Bytes gpt_layer(int t, bool sp, Recompute r) {
  return activation_bytes_per_layer(gpt_shaped(), s, b, t, sp, 1, r);
}

TEST(ActivationMemory, KorthikantiNoParallelism) {  // s*b*h*(34 + 5*a*s/h)
  EXPECT_EQ(gpt_layer(1, false, Recompute::none), s * b * h * 34 + 5 * a * s * s * b);
}

TEST(ActivationMemory, KorthikantiTensorParallel) {  // s*b*h*(10 + 24/t + 5*a*s/(h*t))
  for (std::int64_t t : {2, 4, 8})
    EXPECT_EQ(gpt_layer(static_cast<int>(t), false, Recompute::none),
              s * b * h * 10 + 24 * s * b * h / t + 5 * a * s * s * b / t) << t;
}

TEST(ActivationMemory, KorthikantiSequenceParallel) {  // s*b*h/t*(34 + 5*a*s/h)
  for (std::int64_t t : {2, 4, 8})
    EXPECT_EQ(gpt_layer(static_cast<int>(t), true, Recompute::none), (34 * s * b * h + 5 * a * s * s * b) / t) << t;
}

TEST(ActivationMemory, KorthikantiSelectiveRecompute) {
  for (std::int64_t t : {2, 4, 8}) {
    EXPECT_EQ(gpt_layer(static_cast<int>(t), true, Recompute::selective), 34 * s * b * h / t);
    EXPECT_EQ(gpt_layer(static_cast<int>(t), false, Recompute::selective), s * b * h * 10 + 24 * s * b * h / t);
  }
  EXPECT_EQ(gpt_layer(1, false, Recompute::selective), 34 * s * b * h);
}

TEST(ActivationMemory, KorthikantiFullRecompute) {
  EXPECT_EQ(gpt_layer(1, false, Recompute::full), 2 * s * b * h);
  EXPECT_EQ(gpt_layer(4, false, Recompute::full), 2 * s * b * h);
  EXPECT_EQ(gpt_layer(4, true, Recompute::full), 2 * s * b * h / 4);
}

TEST(ActivationMemory, GeneralisedTensors) {
  ModelConfig m = gpt_shaped();
  m.attention_dropout = 0;
  m.hidden_dropout = 0;
  // No dropout: no masks (2 sbh) and no dropout output or mask of the scores (3 a s^2 b).
  EXPECT_EQ(activation_bytes_per_layer(m, s, b, 1, false, 1, Recompute::none), 32 * s * b * h + 2 * a * s * s * b);
  m.attention_backend = AttentionBackend::flash;  // no s^2 terms; fp32 softmax statistics
  EXPECT_EQ(activation_bytes_per_layer(m, s, b, 1, false, 1, Recompute::none), 32 * s * b * h + 4 * b * a * s);
  // Context parallel: the sequence is split cp ways.
  EXPECT_EQ(activation_bytes_per_layer(m, s, b, 1, false, 2, Recompute::none), 32 * (s / 2) * b * h + 4 * b * a * (s / 2));
  // SwiGLU (fc1 output 2f, activation output f) and GQA (K, V of groups*d).
  m.activation = Activation::swiglu;
  m.ffn_hidden_size = 3 * h;
  m.num_query_groups = 4;
  const std::int64_t kv = 4 * 128;
  const std::int64_t expected = s * b * h * (2 + 2 + 2 + 2 + 2) + 2 * s * b * (h + kv) + 2 * s * b * kv +
                                2 * s * b * 2 * (3 * h) + 2 * s * b * (3 * h) + 4 * b * a * s;
  EXPECT_EQ(activation_bytes_per_layer(m, s, b, 1, false, 1, Recompute::none), expected);
}

// The busiest EP rank keeps its routed copies: one expert per rank, the busiest expert's share (1.5x); 4 experts
// per rank, the busiest with 3 at the others' mean ((1.5 + 3 * 6.5 / 7) / 4); one rank of all 8, every copy.
TEST(ActivationMemory, MoeLayerScalesWithTheBusiestRanksRoutedTokens) {
  ModelConfig m = testing::moe_shaped();
  // Expert tensors per routed token: fc1 input h, fc1 output 2f, fc2 input f, expert output h (2 bytes each).
  const double per_routed_token = 2.0 * (1024 + 2 * 1408 + 1408 + 1024);
  for (auto [ep, rank_imbalance] : {std::pair{8, 1.5}, std::pair{2, (1.5 + 3 * 6.5 / 7) / 4}, std::pair{1, 1.0}}) {
    m.moe.routing_imbalance.reset();
    const Bytes balanced = activation_bytes_per_layer(m, 1024, 1, 1, false, 1, Recompute::none, true, ep);
    m.moe.routing_imbalance = 1.5;
    EXPECT_DOUBLE_EQ(m.moe.rank_imbalance(ep), rank_imbalance) << ep;
    const Bytes skewed = activation_bytes_per_layer(m, 1024, 1, 1, false, 1, Recompute::none, true, ep);
    EXPECT_NEAR(static_cast<double>(skewed - balanced), 1024 * 2 * (rank_imbalance - 1) * per_routed_token, 1) << ep;
  }
}

TEST(ModelStates, SixteenBytesPerParameterAndZeroSharding) {
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(0, 8, "bf16"), 16.0);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(1, 8, "bf16"), 2 + 2 + 12.0 / 8);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(2, 8, "bf16"), 2 + 14.0 / 8);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(3, 8, "bf16"), 16.0 / 8);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(0, 8, "fp32"), 16.0);
  EXPECT_DOUBLE_EQ(model_state_bytes_per_parameter(3, 1, "bf16"), 16.0);
}

TEST(ModelStates, OptimizerPrecisionStoresTheStateNarrower) {
  TrainingConfig t;  // bf16 mixed precision, Adam
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t, FrameworkConfig{}).optimizer, 12);
  t.optimizer_precision = {StateDtype::fp32, StateDtype::bf16, StateDtype::bf16};
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t, FrameworkConfig{}).optimizer, 4 + 2 + 2);
  t.optimizer_precision = {StateDtype::bf16, StateDtype::bf16, StateDtype::bf16};  // no master copy
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t, FrameworkConfig{}).optimizer, 4);
  t.optimizer_precision = {StateDtype::fp16, StateDtype::fp8, StateDtype::fp8};
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t, FrameworkConfig{}).optimizer, 2 + 1 + 1);
  t.precision = "fp32";
  t.optimizer_precision = {StateDtype::fp32, StateDtype::bf16, StateDtype::fp32};
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t, FrameworkConfig{}).optimizer, 2 + 4);
  t.optimizer = "sgd";
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t, FrameworkConfig{}).optimizer, 2);
  // The estimate holds less: 16 - 8 bytes per parameter with bf16 moments and no master copy, unsharded.
  Scenario sc = testing::make_scenario(testing::llama_shaped(), 1, 2048, 64);
  const Strategy st = testing::make_strategy(1, 1);
  const Bytes fp32_states = estimate_memory(sc, st).per_stage[0].optimizer_states;
  sc.training.optimizer_precision = {StateDtype::bf16, StateDtype::bf16, StateDtype::bf16};
  EXPECT_NEAR(double(estimate_memory(sc, st).per_stage[0].optimizer_states), fp32_states / 3.0, 2.0);
}

// The main gradient is held in its own dtype (Megatron's fp32 main_grad unless --grad-reduce-in-bf16), sharded by
// ZeRO-2 as a bf16 one is; DeepSpeed's BF16_Optimizer keeps bf16 gradients with an fp32 copy counted beside them.
TEST(ModelStates, TheMainGradientIsHeldInItsDtype) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(), 2, 2048, 64);
  const Strategy st = testing::make_strategy(1, 1);
  const double bf16_gradients = double(estimate_memory(sc, st).per_stage[0].gradients);
  sc.framework.main_grad_dtype_bytes = 4;
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(sc.training, sc.framework).gradients, 4);
  EXPECT_NEAR(double(estimate_memory(sc, st).per_stage[0].gradients), 2 * bf16_gradients, 1.0);
  sc.framework.main_grad_dtype_bytes.reset();
  sc.framework.reduce_dtype_bytes = 4;  // the main gradient follows the reduction's dtype unless stated
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(sc.training, sc.framework).gradients, 4);
  sc.framework.deepspeed_bf16_optimizer = true;
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(sc.training, sc.framework).gradients, 2);
}

TEST(ModelStates, WholeModelOnOneStageMatchesTheParameterCount) {
  const ModelConfig m = *model_preset("llama2-7b");  // vocabulary 32000 = 250 x 128: no padding
  Strategy st = testing::make_strategy(1, 1);
  EXPECT_EQ(stage_parameters_per_rank(m, st, 0).total(), parameter_count(m));
  const ModelConfig gpt = *model_preset("megatron-gpt-1.7b");  // tied, biases, learned positions
  EXPECT_EQ(stage_parameters_per_rank(gpt, st, 0).total(), parameter_count(gpt));
  for (int layer : {0, 5})
    EXPECT_EQ(layer_parameters_per_rank(gpt, layer, 1, 1).total(), layer_parameter_count(gpt, layer));
  const ModelConfig moe = *model_preset("mixtral-8x7b");
  EXPECT_EQ(layer_parameters_per_rank(moe, 0, 1, 1).total(), layer_parameter_count(moe, 0));
}

TEST(ModelStates, EstimateShardsOverTheDataGroup) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(), 2, 2048, 64);
  for (int zero : {0, 1, 2, 3}) {
    Strategy st = testing::make_strategy(2, 2);
    st.data_parallel_size = 4;
    st.num_micro_batches = 16;
    st.zero_stage = zero;
    const MemoryEstimate mem = estimate_memory(sc, st);
    ASSERT_EQ(mem.per_stage.size(), 2u);
    for (int stage = 0; stage < 2; ++stage) {
      const double params = static_cast<double>(stage_parameters_per_rank(sc.model, st, stage).total());
      const MemoryBreakdown& m = mem.per_stage[stage];
      EXPECT_NEAR(m.parameters + m.gradients + m.optimizer_states,
                  params * model_state_bytes_per_parameter(zero, 4, "bf16"), 3.0);
    }
  }
}

TEST(InFlight, ActivationsFollowTheSchedule) {
  // Middle stage (no embedding, no logits): per-pass activations times the passes in flight.
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 4, 2048, 32);
  Strategy st = testing::make_strategy(2, 4);
  st.data_parallel_size = 4;
  st.num_micro_batches = 8;
  const Bytes layer = activation_bytes_per_layer(sc.model, 2048, 1, 2, true, 1, Recompute::none);
  const Bytes per_pass = 2 * layer;  // 8 layers over 4 stages
  // and, at the first backward after the peak of passes, the last layer's gradients (LayerBackward)
  const Bytes gradients = layer_backward_gradient_bytes(sc.model, 2048, 1, 2, true, 1);
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations, (4 - 1) * per_pass + gradients);  // 1F1B: p - s
  st.schedule = Schedule::gpipe;
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations, 8 * per_pass + gradients);  // GPipe: m
  st.num_micro_batches = 1 << 20;  // extrapolated (LongRunsPeakAsTheirScheduleRepeats): the same closed forms
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations, (1 << 20) * per_pass + gradients);
  st.schedule = Schedule::one_f_one_b;
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations, (4 - 1) * per_pass + gradients);
}

// A long run's activation peak is extrapolated from two replays past the fill (strategies/memory.cpp): it must be
// what the schedule's pattern gives at any count, constant where the passes in flight are bounded, growing by one
// micro-batch's passes per micro-batch under GPipe. Counts up to 4 p (v + 1) + p are replayed whole.
TEST(InFlight, LongRunsPeakAsTheirScheduleRepeats) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 4, 2048, 32);
  const struct {
    Schedule schedule;
    int pp, vpp;
  } cases[] = {{Schedule::one_f_one_b, 4, 1}, {Schedule::gpipe, 4, 1},         {Schedule::interleaved_1f1b, 2, 2},
               {Schedule::interleaved_1f1b, 4, 2}, {Schedule::double_strand, 2, 1}, {Schedule::one_f_one_b, 1, 1}};
  for (const auto& c : cases) {
    Strategy st = testing::make_strategy(1, c.pp);
    st.data_parallel_size = 16 / c.pp;
    st.schedule = c.schedule;
    st.virtual_pipeline_model_parallel_size = c.vpp;
    const auto activations = [&](int micro_batches) {
      st.num_micro_batches = micro_batches;
      std::vector<Bytes> per_stage;
      for (const MemoryBreakdown& stage : estimate_memory(sc, st).per_stage) per_stage.push_back(stage.activations);
      return per_stage;
    };
    const int replayed = 4 * c.pp * (c.vpp + 1) + c.pp;  // the most micro-batches replayed whole
    const std::vector<Bytes> a = activations(replayed - c.pp), b = activations(replayed);
    const int long_run = 1 << 20;
    const std::vector<Bytes> extrapolated = activations(long_run);
    for (std::size_t stage = 0; stage < a.size(); ++stage) {
      const double per_micro_batch = static_cast<double>(b[stage] - a[stage]) / c.pp;
      if (c.schedule != Schedule::gpipe) EXPECT_EQ(per_micro_batch, 0) << "stage " << stage;
      if (c.schedule == Schedule::gpipe) EXPECT_GT(per_micro_batch, 0) << "stage " << stage;
      EXPECT_NEAR(static_cast<double>(extrapolated[stage]),
                  static_cast<double>(b[stage]) + per_micro_batch * (long_run - replayed), 2.0)
          << "schedule " << static_cast<int>(c.schedule) << " pp " << c.pp << " stage " << stage;
    }
  }
}

TEST(InFlight, LastStageHoldsTheLogits) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 1, 2048, 8);
  Strategy st = testing::make_strategy(2, 2);
  st.data_parallel_size = 2;
  st.num_micro_batches = 4;
  const Bytes layer = activation_bytes_per_layer(sc.model, 2048, 1, 2, true, 1, Recompute::none);
  const std::int64_t tokens = 2048, vocab_shard = 32000 / 2;
  // The fused loss keeps the bf16 logits (memory_terms_test.cpp: the unfused loss's fp32 ones).
  const Bytes head = 2 * (tokens / 2) * 1024 * 2 + tokens * vocab_shard * 2;
  EXPECT_EQ(estimate_memory(sc, st).per_stage[1].activations, 4 * layer + head);  // one pass in flight
}

// Without gradient accumulation fusion the output projection's backward writes its weight gradient apart (bf16, the
// rank's vocabulary shard x hidden) beside the logits' gradient before adding it: the last stage's peak holds it.
TEST(InFlight, AWeightGradientWrittenApartIsHeldByItsBackward) {
  Scenario sc = testing::make_scenario(testing::llama_shaped(8), 1, 2048, 8);
  Strategy st = testing::make_strategy(2, 2);
  st.data_parallel_size = 2;
  st.num_micro_batches = 4;
  const Bytes fused = estimate_memory(sc, st).per_stage[1].activations;
  sc.framework.gradient_accumulation_fusion = false;
  const Bytes apart = estimate_memory(sc, st).per_stage[1].activations;
  const std::int64_t vocab_shard = 32000 / 2, hidden = 1024;
  EXPECT_EQ(apart - fused, 2 * vocab_shard * hidden);
}

TEST(OutOfMemory, MessageNamesSizesAndStage) {
  MemoryEstimate mem;
  mem.per_stage.resize(2);
  mem.per_stage[0].parameters = std::llround(93.1 * kGiB);
  mem.per_stage[1].parameters = std::llround(10 * kGiB);
  EXPECT_EQ(out_of_memory_reason(mem, 80.0), "out of memory: 93.1 GiB > 80.0 GiB on stage 0");
  EXPECT_EQ(out_of_memory_reason(mem, 94.0), "");
}

}  // namespace
}  // namespace twin
