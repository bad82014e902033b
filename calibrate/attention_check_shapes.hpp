// The attention shapes `twin calibrate --check` measures apart from calibration's grid, to test how the profile
// prices attention it never timed (issue 43: the held-out check, attention within 5%). Real models' layers per
// TP rank, none of them in the default kernel grid (calibrate/gpu/kernel_calibration.hpp). Pure C++.
#pragma once
#include <string>
#include <vector>

#include "core/op.hpp"

namespace twin {

// A flash-attention op (forward or backward) of a real model's layer, named by where it comes from.
struct ModelAttention {
  Op op;
  std::string origin;  // "llama2-7b, TP 1, seq 4096"
};

// Forward and backward of each: causal flash attention, head dims 64 and 128, GQA and MHA, sequences 2048 to
// 16384, one or more sequences per micro-batch.
std::vector<ModelAttention> off_grid_model_attention();

}  // namespace twin
