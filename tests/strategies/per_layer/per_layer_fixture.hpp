// Per-layer plans written by hand (strategies, executor and CLI tests).
#pragma once
#include <utility>
#include <vector>

#include "strategies/per_layer/per_layer.hpp"

namespace twin::testing {

// A 1F1B plan of `pp` stages holding `split` layers each, micro-batches of `stage_micro_batch` samples.
inline PerLayerPlan per_layer_plan(int pp, int stage_micro_batch, int micro_batches, std::vector<int> split,
                                   std::vector<LayerStrategy> layers) {
  PerLayerPlan plan;
  plan.pipeline_stages = pp;
  plan.stage_micro_batch = stage_micro_batch;
  plan.num_micro_batches = micro_batches;
  plan.stage_layers = std::move(split);
  plan.layers = std::move(layers);
  return plan;
}

}  // namespace twin::testing
