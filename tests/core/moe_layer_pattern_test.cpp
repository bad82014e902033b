// Megatron's --moe-layer-freq list expressions: what the bridge writes reads back as the same layers, and what twin
// cannot represent is refused saying why.
#include <string>

#include <gtest/gtest.h>

#include "core/moe_layer_pattern.hpp"

namespace twin {
namespace {

ModelConfig pattern_model(int layers, int first_dense, int freq) {
  ModelConfig m;
  m.num_layers = layers;
  m.moe.num_experts = 8;
  m.moe.first_dense_layers = first_dense;
  m.moe.layer_freq = freq;
  return m;
}

TEST(MoeLayerPattern, WhatTheBridgeWritesReadsBackAsTheSameLayers) {
  for (const auto& [layers, first_dense, freq] : {std::tuple{61, 3, 1}, std::tuple{4, 1, 1}, std::tuple{12, 2, 2},
                                                  std::tuple{9, 3, 3}}) {
    const ModelConfig m = pattern_model(layers, first_dense, freq);
    const MoeLayerLayout read = read_moe_layer_pattern(moe_layer_pattern(m), layers);
    const ModelConfig back = pattern_model(layers, read.first_dense_layers, read.layer_freq);
    for (int i = 0; i < layers; ++i) EXPECT_EQ(back.is_moe_layer(i), m.is_moe_layer(i)) << moe_layer_pattern(m);
  }
  EXPECT_EQ(moe_layer_pattern(pattern_model(61, 3, 1)), "([0]*3+[1]*58)");  // DeepSeek-V3's own
}

TEST(MoeLayerPattern, ReadsListsRepeatsAndParentheses) {
  const MoeLayerLayout a = read_moe_layer_pattern(" ( [0] * 2 + [1]*6 ) ", 8);
  EXPECT_EQ(a.first_dense_layers, 2);
  EXPECT_EQ(a.layer_freq, 1);
  const MoeLayerLayout b = read_moe_layer_pattern("[1,0]*4", 8);
  EXPECT_EQ(b.first_dense_layers, 0);
  EXPECT_EQ(b.layer_freq, 2);
}

TEST(MoeLayerPattern, RefusesOtherGrammarsLengthsAndLayouts) {
  for (const char* text : {"[0]*3+", "[2]*4", "([1]*4", "range(4)", "[1]*4 extra", "[1]*999999999"})
    EXPECT_THROW(read_moe_layer_pattern(text, 4), std::invalid_argument) << text;
  EXPECT_THROW(read_moe_layer_pattern(std::string(100000, '(') + "[1]*4", 4), std::invalid_argument);  // depth
  EXPECT_THROW(read_moe_layer_pattern("[1]*5", 4), std::invalid_argument);      // five layers for four
  EXPECT_THROW(read_moe_layer_pattern("[0]*4", 4), std::invalid_argument);      // no MoE layer
  EXPECT_THROW(read_moe_layer_pattern("[1,1,0,1]", 4), std::invalid_argument);  // not every n-th after the dense ones
}

}  // namespace
}  // namespace twin
