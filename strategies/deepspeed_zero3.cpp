// The reuse distance of each linear weight within a layer, in forward order: the later linears run their
// recomputed forward and then their backward before this weight's backward.
#include "strategies/deepspeed_zero3.hpp"

#include <vector>

#include "core/layer.hpp"

namespace twin::lowering {

std::int64_t deepspeed_regathered_elements(const RankShapes& shapes, bool moe_layer) {
  std::vector<std::int64_t> weights;
  for (const layer::Block& block : layer::layer_blocks(moe_layer))
    if (block.kind == layer::BlockKind::column_linear || block.kind == layer::BlockKind::row_linear)
      weights.push_back(width_per_rank(shapes, block.out_width) * width_per_rank(shapes, block.in_width));
  std::int64_t regathered = 0, used_later = 0;
  for (auto w = weights.rbegin(); w != weights.rend(); ++w) {
    if (2 * used_later >= kDeepSpeedMaxReuseDistanceElements) regathered += *w;
    used_later += *w;
  }
  return regathered;
}

}  // namespace twin::lowering
