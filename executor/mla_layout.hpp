// Multi-latent attention's shapes on one GPU (TP 1), from the model's MlaConfig (core/model.hpp): what
// executor/gpu/mla_attention.hpp runs. Its weights are the layer's parameter unit's (executor/parameters.cpp), which
// core's layer_parameter_groups counts (tests/executor/mla_layout_test.cpp).
#pragma once
#include <cstdint>

#include "core/model.hpp"

namespace twin::exec {

struct MlaShape {
  std::int64_t batch = 0, seq = 0, hidden = 0;
  int heads = 0;
  std::int64_t q_lora_rank = 0, kv_lora_rank = 0;
  int nope = 0, rope = 0, v = 0;  // qk_head_dim, qk_pos_emb_head_dim, v_head_dim
  float rope_theta = 10000.f;
  std::int64_t tokens() const { return batch * seq; }
  int q_head() const { return nope + rope; }
  std::int64_t q_width() const { return static_cast<std::int64_t>(heads) * q_head(); }
  std::int64_t kv_width() const { return static_cast<std::int64_t>(heads) * (nope + v); }
  std::int64_t ckv_width() const { return kv_lora_rank + rope; }  // the kv down projection's output
  std::int64_t o_width() const { return static_cast<std::int64_t>(heads) * v; }
};
// The model's MLA over micro-batches of `batch` sequences of `seq` tokens on one GPU; throws when it has none. The
// latents' norms take the norm entry's epsilon (1e-5, as every norm twin execute runs; DeepSeek-V3's rms_norm_eps
// is 1e-6).
MlaShape mla_shape(const ModelConfig& model, std::int64_t batch, std::int64_t seq);

}  // namespace twin::exec
