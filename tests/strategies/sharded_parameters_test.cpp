// The shards of the parameters, summed over one model replica's ranks (TP x PP for the dense part, EP for the
// experts), give back core's total: every layer on one stage, the embedding and output layer once, TP's
// replicated parts once per TP rank, and a tied output layer's copy of the embedding on the last stage.
#include <gtest/gtest.h>

#include "strategies/sharded_parameters.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

using testing::make_strategy;

// Parameters every TP rank holds whole: the layers' norms, router and row-parallel biases, learned positions
// and the final norm.
std::int64_t replicated_over_tp(const ModelConfig& m) {
  const EmbeddingAndOutputParameters ends = embedding_and_output_parameters(m, m.vocab_size);
  std::int64_t total = ends.position_embedding + ends.final_norm;
  for (int layer = 0; layer < m.num_layers; ++layer) total += layer_parameter_groups(m, layer).replicated;
  return total;
}

void expect_shards_add_up(const ModelConfig& model, const Strategy& s) {
  const int tp = s.tensor_model_parallel_size, pp = s.pipeline_model_parallel_size;
  ModelConfig padded = model;
  padded.vocab_size = padded_vocab_size(model, tp);
  std::int64_t summed = 0;
  for (int stage = 0; stage < pp; ++stage) {
    const RankParameters p = stage_parameters_per_rank(model, s, stage);
    summed += tp * p.dense + s.expert_model_parallel_size * p.expert;
  }
  const bool tied_copy = !model.untie_embeddings_and_output_weights && pp > 1 && s.schedule != Schedule::double_strand;
  const std::int64_t expected = parameter_count(padded) + (tp - 1) * replicated_over_tp(model) +
                                (tied_copy ? padded.vocab_size * model.hidden_size : 0);
  EXPECT_EQ(summed, expected) << model.name << " tp " << tp << " pp " << pp << " vpp "
                              << s.virtual_pipeline_model_parallel_size << " ep " << s.expert_model_parallel_size;
}

Strategy with_experts(Strategy s, int ep) {
  s.expert_model_parallel_size = ep;
  return s;
}

TEST(ShardedParameters, LlamaShapedGqaUntiedAddsUpUnderTpAndPp) {
  const ModelConfig m = testing::llama_shaped(8);  // 32000 = 250 x 128: padded only from TP 4 on
  for (int tp : {1, 2, 4, 8})
    for (int pp : {1, 2, 4}) expect_shards_add_up(m, make_strategy(tp, pp));
  expect_shards_add_up(m, make_strategy(2, 2, 1, true, 2, Schedule::interleaved_1f1b));
  expect_shards_add_up(m, make_strategy(2, 2, 1, true, 1, Schedule::double_strand));
}

TEST(ShardedParameters, GptShapedTiedWithBiasesAndLearnedPositionsAddsUp) {
  ModelConfig m = testing::gpt_shaped();
  m.add_bias_linear = true;
  for (int tp : {1, 2, 4})
    for (int pp : {1, 2, 4}) expect_shards_add_up(m, make_strategy(tp, pp));
  expect_shards_add_up(m, make_strategy(2, 2, 1, true, 1, Schedule::double_strand));  // both ends on stage 0
}

TEST(ShardedParameters, UnevenLayerSplitAndPaddedVocabularyAddUp) {
  ModelConfig m = *model_preset("gpt3-175b");  // vocabulary 50257: padded at every TP
  m.num_layers = 10;                             // 4 stages of 3, the first and last one fewer
  for (int tp : {1, 2, 8}) expect_shards_add_up(m, make_strategy(tp, 4));
}

TEST(ShardedParameters, MoeExpertsSplitOverEpAddUp) {
  const ModelConfig moe = testing::moe_shaped();
  for (int ep : {1, 2, 4, 8})
    for (int tp : {1, 2}) expect_shards_add_up(moe, with_experts(make_strategy(tp, 2), ep));
  ModelConfig every_other = *model_preset("mixtral-8x7b");
  every_other.moe.layer_freq = 2;
  every_other.num_layers = 8;
  expect_shards_add_up(every_other, with_experts(make_strategy(2, 2), 4));
  expect_shards_add_up(every_other, with_experts(make_strategy(4, 1), 8));
}

}  // namespace
}  // namespace twin
