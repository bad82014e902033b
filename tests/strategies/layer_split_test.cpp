// Layers over virtual pipeline stages: even where they divide, else Llama 3's split (the first and the
// last virtual stage one layer short), and never anything else.
#include <gtest/gtest.h>

#include <numeric>

#include "core/model.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {

Strategy pipeline(int pp, int vpp) {
  Strategy s;
  s.pipeline_model_parallel_size = pp;
  s.virtual_pipeline_model_parallel_size = vpp;
  return s;
}

// Every layer exactly once, in order, over the virtual stages.
void expect_partition(const ModelConfig& m, const Strategy& s) {
  int next = 0;
  for (int chunk = 0; chunk < s.virtual_pipeline_model_parallel_size; ++chunk)
    for (int stage = 0; stage < s.pipeline_model_parallel_size; ++stage) {
      EXPECT_EQ(first_layer_of(m, s, stage, chunk), next) << stage << "," << chunk;
      next += layers_in_virtual_stage(m, s, chunk * s.pipeline_model_parallel_size + stage);
    }
  EXPECT_EQ(next, m.num_layers);
}

TEST(LayerSplit, EvenWhenDivisible) {
  ModelConfig m = *model_preset("llama2-70b");  // 80 layers
  Strategy s = pipeline(8, 2);
  for (int vs = 0; vs < 16; ++vs) EXPECT_EQ(layers_in_virtual_stage(m, s, vs), 5);
  expect_partition(m, s);
}

TEST(LayerSplit, Llama3_405BOnSixteenStagesShortensFirstAndLast) {
  ModelConfig m = *model_preset("llama3-405b");  // 126 layers
  Strategy s = pipeline(16, 1);
  EXPECT_EQ(layers_in_virtual_stage(m, s, 0), 7);
  EXPECT_EQ(layers_in_virtual_stage(m, s, 15), 7);
  for (int vs = 1; vs < 15; ++vs) EXPECT_EQ(layers_in_virtual_stage(m, s, vs), 8);
  expect_partition(m, s);
}

TEST(LayerSplit, Llama3_405BInEightChunksGivesTheEmbeddingAndTheLossChunksOfTheirOwn) {
  // Llama 3's schedule: 126 layers over 16 x 8 virtual stages, the first holding only the embedding and the
  // last only the output layer and loss (Dubey et al. 2024, section 3.3.2).
  ModelConfig m = *model_preset("llama3-405b");
  Strategy s = pipeline(16, 8);
  EXPECT_EQ(layers_in_virtual_stage(m, s, 0), 0);
  EXPECT_EQ(layers_in_virtual_stage(m, s, 127), 0);
  for (int vs = 1; vs < 127; ++vs) EXPECT_EQ(layers_in_virtual_stage(m, s, vs), 1);
  expect_partition(m, s);
}

TEST(LayerSplit, OneMissingShortensOnlyTheLast) {
  ModelConfig m = *model_preset("llama2-7b");
  m.num_layers = 31;
  Strategy s = pipeline(4, 2);
  EXPECT_EQ(layers_in_virtual_stage(m, s, 0), 4);
  EXPECT_EQ(layers_in_virtual_stage(m, s, 7), 3);
  expect_partition(m, s);
}

}  // namespace
}  // namespace twin
