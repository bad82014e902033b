// The MLA block's weights as the GPU tests allocate them and the float64 reference reads them (the reference's own
// shapes, written from DeepSeek-V3's equations: q_proj in q_up's place, q_down and q_norm empty, when q_lora_rank is
// 0). twin execute's weights are the layer's parameter unit's, which core counts (tests/executor/mla_layout_test.cpp).
#pragma once
#include <cstdint>

#include "executor/mla_layout.hpp"

namespace twin::test {

struct MlaWeightElements {
  std::int64_t q_down, q_norm, q_up, kv_down, kv_norm, kv_up;
};
inline MlaWeightElements mla_weight_elements(const exec::MlaShape& s) {
  const bool latent = s.q_lora_rank > 0;
  return {latent ? s.hidden * s.q_lora_rank : 0, latent ? s.q_lora_rank : 0,
          (latent ? s.q_lora_rank : s.hidden) * s.q_width(), s.hidden * s.ckv_width(), s.kv_lora_rank,
          s.kv_lora_rank * s.kv_width()};
}

}  // namespace twin::test
