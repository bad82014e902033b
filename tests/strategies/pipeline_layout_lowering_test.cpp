// A stated pipeline layout (Megatron's --pipeline-model-parallel-layout) decides which layers each virtual stage
// lowers, what each stage holds and what validity allows; multi-token prediction is lowered beside the loss, counted
// in parameters, memory and MFU's FLOPs as Megatron counts them (hand-derived figures below).
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"
#include "strategy_fixtures.hpp"

namespace twin {
namespace {

PipelineLayout parsed_layout(std::string_view text) {
  std::string error;
  return parse_pipeline_layout(text, error).value();
}

Strategy interleaved_with(std::string_view layout) {
  Strategy st = testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b);
  st.pipeline_model_parallel_layout = parsed_layout(layout);
  return st;
}

std::optional<std::string> completed_reason(const Scenario& sc, Strategy st) {
  if (auto r = complete_strategy(sc, st)) return r;
  return invalid_reason(sc, st);
}

// The layers each rank class's ops name, one set per class.
std::multiset<std::set<int>> layers_per_class(const IterationGraph& g) {
  std::multiset<std::set<int>> out;
  for (const RankClass& rc : g.classes) {
    std::set<int> layers;
    for (OpIndex i = 0; i < rc.size(); ++i)
      if (rc.op(i).layer >= 0) layers.insert(rc.op(i).layer);
    out.insert(layers);
  }
  return out;
}

TEST(PipelineLayoutLowering, TheLayoutDecidesEachVirtualStagesLayers) {
  // Nine layers over four virtual stages: the even split would leave three short, the layout states 1, 3, 3, 2.
  const ModelConfig m = testing::llama_shaped(9);
  const Scenario sc = testing::make_scenario(m, 1, 1024, 32);
  Strategy even = testing::make_strategy(1, 2, 1, false, 2, Schedule::interleaved_1f1b);
  EXPECT_EQ(completed_reason(sc, even),
            "num_layers 9 not divisible by pipeline_model_parallel_size*virtual_pipeline_model_parallel_size 4"
            " (an uneven split may only shorten the first and last virtual stage by one layer each)");
  Strategy st = interleaved_with("Et|ttt|ttt|ttL");
  ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  EXPECT_EQ(layers_in_virtual_stage(m, st, 0), 1);
  EXPECT_EQ(layers_in_virtual_stage(m, st, 3), 2);
  EXPECT_EQ(first_layer_of(m, st, 0, 1), 4);  // stage 0's second chunk is virtual stage 2
  EXPECT_EQ(first_layer_of(m, st, 1, 1), 7);
  EXPECT_EQ(max_layers_in_virtual_stage(m, st), 3);
  // Stage 0 runs virtual stages 0 and 2 (layers 0, 4-6), stage 1 virtual stages 1 and 3 (layers 1-3, 7-8).
  EXPECT_EQ(layers_per_class(lower_to_op_graphs(sc, st)),
            (std::multiset<std::set<int>>{{0, 4, 5, 6}, {1, 2, 3, 7, 8}}));
  RankParameters stage0;
  for (int layer : {0, 4, 5, 6}) stage0 += layer_parameters_per_rank(m, layer, 1, 1);
  stage0.dense += embedding_parameters_per_rank(m, 1);
  EXPECT_EQ(stage_parameters_per_rank(m, st, 0).total(), stage0.total());
  EXPECT_TRUE(st.key().ends_with(".interleaved-1f1b.layout-1-3x2-2"));
}

TEST(PipelineLayoutLowering, ALayoutThatDoesNotFitIsInvalidByName) {
  const Scenario sc = testing::make_scenario(testing::llama_shaped(9), 1, 1024, 32);
  EXPECT_EQ(completed_reason(sc, interleaved_with("Et|ttt|ttt|tL")),
            "pipeline_model_parallel_layout places 8 transformer layers t, not num_layers 9");
  EXPECT_EQ(completed_reason(sc, interleaved_with("Et|ttt|ttt|ttmL")),
            "pipeline_model_parallel_layout places 1 MTP layers m, not mtp_num_layers 0");
  Strategy folded = testing::make_strategy(1, 2, 1, false, 1, Schedule::double_strand);
  folded.pipeline_model_parallel_layout = parsed_layout("Ettttt|ttttL");
  EXPECT_EQ(completed_reason(sc, folded), "double-strand folds the model over its stages: it takes no pipeline_model_parallel_layout");
}

ModelConfig with_mtp(int layers) {
  ModelConfig m = testing::llama_shaped(layers);
  m.mtp_num_layers = 1;
  return m;
}

TEST(MultiTokenPrediction, ParametersAreTheDepthsNormsProjectionAndLayer) {
  const ModelConfig m = with_mtp(4);
  const std::int64_t h = m.hidden_size;
  const LayerParameterGroups last = layer_parameter_groups(m, 3), mtp = layer_parameter_groups(m, 4);
  EXPECT_EQ(mtp.mtp_projection, 2 * h * h);
  EXPECT_EQ(mtp.replicated, last.replicated + 3 * h);  // enorm, hnorm, final_layernorm
  EXPECT_EQ(parameter_count(m) - parameter_count(testing::llama_shaped(4)), layer_parameter_count(m, 3) + 2 * h * h + 3 * h);
  // The last stage (PP 2, TP 2) holds the depth and a copy of the word embedding (untied: the output layer is not it).
  const Strategy st = testing::make_strategy(2, 2);
  const RankParameters without = stage_parameters_per_rank(testing::llama_shaped(4), st, 1);
  EXPECT_EQ(stage_parameters_per_rank(m, st, 1).total() - without.total(),
            layer_parameters_per_rank(m, 4, 2, 1).total() + 32000 * h / 2);
  EXPECT_EQ(stage_parameters_per_rank(m, st, 0).total(), stage_parameters_per_rank(testing::llama_shaped(4), st, 0).total());
}

TEST(MultiTokenPrediction, LoweredBesideTheLossOnTheLastStage) {
  const ModelConfig m = with_mtp(4);
  const Scenario sc = testing::make_scenario(m, 1, 1024, 8);  // TP 2, PP 2, DP 2: 4 micro-batches of 1
  Strategy st = testing::make_strategy(2, 2);
  ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
  ASSERT_EQ(invalid_reason(sc, st), std::nullopt);
  ASSERT_EQ(st.num_micro_batches, 4);
  const IterationGraph g = lower_to_op_graphs(sc, st);
  int projections = 0, losses = 0, lookups = 0, syncs = 0, mtp_layer_ops = 0;
  for (const RankClass& rc : g.classes)
    for (OpIndex i = 0; i < rc.size(); ++i) {
      const Op& op = rc.op(i);
      if (op.role == OpRole::mtp_projection && op.kind == OpKind::gemm) {
        ++projections;
        if (op.phase == Phase::forward) EXPECT_DOUBLE_EQ(op.flops, 2.0 * 1024 * (1024 / 2) * 2048);
      }
      losses += op.kind == OpKind::loss_forward;
      lookups += op.kind == OpKind::embedding_forward;
      syncs += op.role == OpRole::embedding_grad_sync;
      mtp_layer_ops += op.layer == 4;
    }
  EXPECT_EQ(projections, 4 * 3);  // forward, input and weight gradients, per micro-batch
  EXPECT_EQ(losses, 4 * 2);       // the main loss and the depth's
  EXPECT_EQ(lookups, 4 * 2);      // the first stage's and the depth's (shifted tokens) lookups
  EXPECT_EQ(syncs, 2);            // the table's copies summed over the embedding group, on both stages
  EXPECT_GT(mtp_layer_ops, 0);
  // Without MTP an untied model's stages share no table.
  Scenario plain = sc;
  plain.model.mtp_num_layers = 0;
  int plain_syncs = 0;
  for (const RankClass& rc : lower_to_op_graphs(plain, st).classes)
    for (OpIndex i = 0; i < rc.size(); ++i) plain_syncs += rc.op(i).role == OpRole::embedding_grad_sync;
  EXPECT_EQ(plain_syncs, 0);
}

TEST(MultiTokenPrediction, FlopsAreALayerEhProjAndALogitMore) {
  // Megatron's num_floating_point_operations: a depth is a layer of the last layer's kind, eh_proj (2h x h) and a
  // logit (h x V), each 3 passes x 2 FLOPs per multiply-add per token.
  const Scenario with = testing::make_scenario(with_mtp(4), 1, 1024, 8);
  const Scenario five = testing::make_scenario(testing::llama_shaped(5), 1, 1024, 8);
  const double h = 1024, vocab = 32000, tokens = 8 * 1024;
  EXPECT_DOUBLE_EQ(model_flops_per_iteration(with) - model_flops_per_iteration(five),
                   3 * 2 * (2 * h * h + h * vocab) * tokens);
}

TEST(MultiTokenPrediction, MemoryKeepsTheEntrysAndItsHeadsTensors) {
  const Scenario sc = testing::make_scenario(with_mtp(4), 1, 1024, 8);
  const double rows = 1024;
  // Under SP (TP 2) the entry keeps enorm's and hnorm's inputs (h each) and eh_proj's input (2h) on the rank's rows.
  EXPECT_EQ(mtp_edge_activation_bytes(sc, rows, 2, true),
            output_layer_activation_bytes(sc, rows, 2, true) + static_cast<Bytes>(4 * 1024 * rows / 2 * 2));
  Scenario plain = sc;
  plain.model.mtp_num_layers = 0;
  Strategy st = testing::make_strategy(2, 2);
  ASSERT_EQ(complete_strategy(sc, st), std::nullopt);
  EXPECT_GT(estimate_memory(sc, st).per_stage[1].activations, estimate_memory(plain, st).per_stage[1].activations);
  EXPECT_EQ(estimate_memory(sc, st).per_stage[0].activations, estimate_memory(plain, st).per_stage[0].activations);
}

}  // namespace
}  // namespace twin
