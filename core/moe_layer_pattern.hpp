// Which layers of a model are MoE layers, as Megatron's --moe-layer-freq spells it (megatron/training/arguments.py,
// moe_freq_type): an integer (every n-th layer), or a Python list expression of 0 (dense) and 1 (MoE) per layer,
// "([0]*3+[1]*58)" for DeepSeek-V3's three dense first layers. twin's model says the same with
// model.moe.first_dense_layers and layer_freq (core/model.hpp); this file writes one from the other and reads back.
#pragma once
#include <string>
#include <string_view>

#include "core/model.hpp"

namespace twin {

// The expression for a model whose first layers are dense: "([0]*k+[1]*n)" when every later layer is MoE, else the
// whole list "[0,0,1,0,1,...]".
std::string moe_layer_pattern(const ModelConfig& m);

struct MoeLayerLayout {
  int first_dense_layers = 0;
  int layer_freq = 1;
};

// The list expression `text` for a model of `num_layers` layers as (first dense layers, frequency after them).
// Reads sums of lists of 0 and 1 and of such lists repeated ("[0]*3", "[0,1]*4"), optionally in parentheses.
// Throws std::invalid_argument saying what is wrong: another grammar, a length other than num_layers, or a pattern
// that is not k dense layers followed by every n-th layer MoE.
MoeLayerLayout read_moe_layer_pattern(std::string_view text, int num_layers);

}  // namespace twin
