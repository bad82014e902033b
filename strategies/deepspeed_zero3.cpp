// The reuse distance of each linear weight within a layer, and the walk over a pass's fetches that tells which
// weights the hook before them prefetched.
#include "strategies/deepspeed_zero3.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/layer.hpp"

namespace twin::lowering {
namespace {

// This rank's elements of each linear weight of the layer, in forward order.
std::vector<std::int64_t> linear_weights(const RankShapes& shapes, bool moe_layer) {
  std::vector<std::int64_t> weights;
  for (const layer::Block& block : layer::layer_blocks(moe_layer))
    if (block.kind == layer::BlockKind::column_linear || block.kind == layer::BlockKind::row_linear)
      weights.push_back(width_per_rank(shapes, block.out_width) * width_per_rank(shapes, block.in_width));
  return weights;
}

// Whether each weight (forward order) is released after its recomputed forward: the weights used before its
// backward, the later ones twice (recomputed forward, then backward), hold at least the reuse distance.
std::vector<bool> released_after_recompute(const std::vector<std::int64_t>& weights) {
  std::vector<bool> released(weights.size(), false);
  std::int64_t used_later = 0;
  for (std::size_t i = weights.size(); i-- > 0;) {
    released[i] = 2 * used_later >= kDeepSpeedMaxReuseDistanceElements;
    used_later += weights[i];
  }
  return released;
}

// One fetch of a weight in a pass: its elements and the elements live at its pre-hook (its own and the kept ones).
struct Fetch {
  std::int64_t elements;
  std::int64_t live_elements;
};

std::vector<Fetch> pass_fetches(const std::vector<std::int64_t>& weights, bool backward, bool full_recompute) {
  std::vector<Fetch> fetches;
  const std::size_t n = weights.size();
  if (!backward) {
    for (std::int64_t w : weights) fetches.push_back({w, w});
    return fetches;
  }
  if (!full_recompute) {
    for (std::size_t i = n; i-- > 0;) fetches.push_back({weights[i], weights[i]});
    return fetches;
  }
  const std::vector<bool> released = released_after_recompute(weights);
  std::int64_t kept = 0;  // weights kept since their recomputed forward, not yet used by their backward
  for (std::size_t i = 0; i < n; ++i) {
    fetches.push_back({weights[i], weights[i] + kept});
    if (!released[i]) kept += weights[i];
  }
  for (std::size_t i = n; i-- > 0;) {
    if (!released[i]) {
      kept -= weights[i];  // used by its backward now, released after it
      continue;
    }
    fetches.push_back({weights[i], weights[i] + kept});
  }
  return fetches;
}

}  // namespace

std::int64_t deepspeed_regathered_elements(const RankShapes& shapes, bool moe_layer) {
  const std::vector<std::int64_t> weights = linear_weights(shapes, moe_layer);
  const std::vector<bool> released = released_after_recompute(weights);
  std::int64_t regathered = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) regathered += released[i] ? weights[i] : 0;
  return regathered;
}

DeepSpeedLayerGathers deepspeed_layer_gathers(const RankShapes& shapes, bool moe_layer, bool backward,
                                              bool full_recompute) {
  const std::vector<Fetch> fetches = pass_fetches(linear_weights(shapes, moe_layer), backward, full_recompute);
  DeepSpeedLayerGathers gathers;
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    const Fetch& issuer = fetches[i == 0 ? fetches.size() - 1 : i - 1];
    if (issuer.live_elements < kDeepSpeedMaxLiveElements) {
      gathers.prefetched_elements += fetches[i].elements;
      ++gathers.prefetched_weights;
    } else {
      gathers.on_demand_elements += fetches[i].elements;
      ++gathers.on_demand_weights;
    }
  }
  return gathers;
}

std::int64_t deepspeed_peak_gathered_elements(const RankShapes& shapes, bool moe_layer, bool full_recompute) {
  const std::vector<std::int64_t> weights = linear_weights(shapes, moe_layer);
  std::int64_t peak = 0;
  for (bool backward : {false, true}) {
    const std::vector<Fetch> fetches = pass_fetches(weights, backward, full_recompute);
    for (std::size_t i = 0; i < fetches.size(); ++i) {
      const bool prefetches = fetches[i].live_elements < kDeepSpeedMaxLiveElements;
      const std::int64_t next = fetches[(i + 1) % fetches.size()].elements;  // layers alike: the next layer's first
      peak = std::max(peak, fetches[i].live_elements + (prefetches ? next : 0));
    }
  }
  return peak;
}

std::int64_t deepspeed_largest_weight_elements(const RankShapes& shapes, bool moe_layer) {
  const std::vector<std::int64_t> weights = linear_weights(shapes, moe_layer);
  return weights.empty() ? 0 : *std::max_element(weights.begin(), weights.end());
}

}  // namespace twin::lowering
