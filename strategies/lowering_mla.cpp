// Multi-latent attention's ops, as DeepSeek-V3 computes it and executor/gpu/mla_attention.cpp runs it: every
// projection a linear of its own (its FP8 casts and gradient accumulation as any linear's, at TP 1), the latents'
// norms RMSNorm over their ranks, RoPE over the queries' and the shared key's rope parts.
#include "strategies/lowering_mla.hpp"

#include "strategies/lowering_linears.hpp"

namespace twin::lowering {
namespace {

std::int64_t q_width(const RankShapes& s) { return s.heads * s.d; }                    // heads x (nope + rope)
std::int64_t kv_width(const RankShapes& s) { return s.heads * (s.d - s.rope_d + s.v_d); }  // heads x (nope + v)
std::int64_t ckv_width(const RankShapes& s) { return s.kv_lora_rank + s.rope_d; }       // the kv down projection's out

Op latent_norm(const RankShapes& s, OpRole role, bool backward, std::int64_t rank) {
  Op op = Emitter::rows_cols(backward ? OpKind::norm_backward : OpKind::norm_forward, role, s.tokens, rank);
  op.normalization = Normalization::rmsnorm;  // DeepSeek-V3's latents' norms, whatever the layer's
  return op;
}

// The kv latent leaves the down projection's rows (kv_lora_rank + rope wide) for the norm, and its gradient goes
// back: a bf16 read and write of tokens x kv_lora_rank.
Op latent_copy(const RankShapes& s) {
  return Emitter::moved(OpKind::elementwise, OpRole::mla_kv_norm, 2 * 2 * s.tokens * s.kv_lora_rank);
}

void queries_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  if (s.q_lora_rank == 0) {
    column_parallel_forward(e, OpRole::mla_q_up, q_width(s), s.h);
    return;
  }
  column_parallel_forward(e, OpRole::mla_q_down, s.q_lora_rank, s.h);
  e.emit(latent_norm(s, OpRole::mla_q_norm, false, s.q_lora_rank));
  column_parallel_forward(e, OpRole::mla_q_up, q_width(s), s.q_lora_rank);
}

void queries_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  if (s.q_lora_rank == 0) {
    column_parallel_backward(e, OpRole::mla_q_up, q_width(s), s.h);
    return;
  }
  column_parallel_backward(e, OpRole::mla_q_up, q_width(s), s.q_lora_rank);
  e.emit(latent_norm(s, OpRole::mla_q_norm, true, s.q_lora_rank));
  column_parallel_backward(e, OpRole::mla_q_down, s.q_lora_rank, s.h);
}

void keys_values_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  column_parallel_forward(e, OpRole::mla_kv_down, ckv_width(s), s.h);
  e.emit(latent_copy(s));
  e.emit(latent_norm(s, OpRole::mla_kv_norm, false, s.kv_lora_rank));
  column_parallel_forward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
}

void keys_values_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  column_parallel_backward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
  e.emit(latent_norm(s, OpRole::mla_kv_norm, true, s.kv_lora_rank));
  e.emit(latent_copy(s));
  column_parallel_backward(e, OpRole::mla_kv_down, ckv_width(s), s.h);
}

// RoPE over every head's query rope part and the one shared key's.
Op rope(const RankShapes& s, bool backward) {
  return Emitter::rows_cols(backward ? OpKind::rope_backward : OpKind::rope_forward, OpRole::rope, s.tokens,
                            (s.heads + 1) * s.rope_d);
}

}  // namespace

std::int64_t mla_expand_bytes(const RankShapes& s) {
  const std::int64_t in = kv_width(s) + s.rope_d, out = q_width(s) + s.heads * s.v_d;
  return 2 * s.tokens * (in + out);
}

void emit_mla_attention(Emitter& e, bool backward, void (*attention)(Emitter& e, bool backward)) {
  const RankShapes& s = e.shapes();
  const Op expand = Emitter::moved(OpKind::elementwise, OpRole::mla_kv_expand, mla_expand_bytes(s));
  if (!backward) {
    queries_forward(e);
    keys_values_forward(e);
    e.emit(rope(s, false));
    e.emit(expand);
    attention(e, false);
    return;
  }
  if (s.recompute == Recompute::selective) e.recompute([&] { attention(e, false); });
  attention(e, true);
  e.emit(expand);
  e.emit(rope(s, true));
  keys_values_backward(e);
  queries_backward(e);
}

}  // namespace twin::lowering
