// The rows the embedding and the output layer of a per-layer plan work on, beside each layout of the layer next to
// them: what twin execute reads for them (strategies/families/rank_plan.hpp) and what its plan check holds whole.
#pragma once
#include "strategies/per_layer/per_layer.hpp"

namespace twin {

// The rows of a stage micro-batch the embedding or the output layer beside a layer of layout `beside` works on, on
// GPU `gpu`: of the samples `block`, the shard-th of `shards` contiguous equal runs of their rows. Beside a Megatron
// layout, its block's samples whole (its TP group shares them, edge_layout); beside a Ulysses layout, the GPU's run
// of its Ulysses block's rows, the rows [gpu T, (gpu + 1) T) the layer holds there (as DeepSpeed-Ulysses shards the
// sequence from the input on), so nothing moves between the edge and the layer, whole samples or not. Throws
// std::invalid_argument where the block's samples are not whole.
struct EdgeRows {
  BlockSamples block;
  int shard = 0, shards = 1;
};
EdgeRows edge_rows(const LayerLayout& beside, int stage_gpus, int stage_micro_batch, int gpu);

}  // namespace twin
