#include "executor/mla_layout.hpp"

#include <stdexcept>

namespace twin::exec {

MlaShape mla_shape(const ModelConfig& model, std::int64_t batch, std::int64_t seq) {
  const MlaConfig& a = model.mla;
  if (!a.enabled()) throw std::invalid_argument("mla_shape: the model has no multi-latent attention");
  return {batch, seq, model.hidden_size, model.num_attention_heads, a.q_lora_rank, a.kv_lora_rank,
          static_cast<int>(a.qk_head_dim), static_cast<int>(a.qk_pos_emb_head_dim), static_cast<int>(a.v_head_dim),
          static_cast<float>(model.rotary_base)};
}

}  // namespace twin::exec
