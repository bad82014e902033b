// Multi-latent attention's ops, as DeepSeek-V3 computes it and executor/gpu/mla_attention.cpp runs it: every
// projection a linear of its own (its FP8 casts and gradient accumulation as any linear's), the latents' norms
// RMSNorm over their ranks, RoPE over the queries' and the shared key's rope parts.
// Under TP, as Megatron-LM runs it (megatron/core/transformer/multi_latent_attention.py at NVIDIA/Megatron-LM
// d98e8a64dd, MLASelfAttention.__init__ and get_query_key_value_tensors): the down projections are TELinear with
// parallel_mode 'duplicated' (whole on every rank, on the rank's rows: tokens / tp under SP), the latents' norms on
// those rows, the up projections column-parallel over the heads (their SP gather moves the latents), the shared RoPE
// key gathered from the sequence-parallel region (gather_from_sequence_parallel_region: its backward a
// reduce-scatter); the output projection is the layer's row-parallel one.
#include "strategies/lowering_mla.hpp"

#include "strategies/lowering_linears.hpp"

namespace twin::lowering {
namespace {

std::int64_t q_width(const RankShapes& s) { return s.heads * s.d; }                    // heads x (nope + rope)
std::int64_t kv_width(const RankShapes& s) { return s.heads * (s.d - s.rope_d + s.v_d); }  // heads x (nope + v)
std::int64_t ckv_width(const RankShapes& s) { return s.kv_lora_rank + s.rope_d; }       // the kv down projection's out

Op latent_norm(const RankShapes& s, OpRole role, bool backward, std::int64_t rank) {
  Op op = Emitter::rows_cols(backward ? OpKind::norm_backward : OpKind::norm_forward, role, s.tokens_local, rank);
  op.normalization = Normalization::rmsnorm;  // DeepSeek-V3's latents' norms, whatever the layer's
  return op;
}

// The kv latent leaves the down projection's rows (kv_lora_rank + rope wide) for the norm, and its gradient goes
// back: a bf16 read and write of the rank's rows x kv_lora_rank.
Op latent_copy(const RankShapes& s) {
  return Emitter::moved(OpKind::elementwise, OpRole::mla_kv_norm, 2 * 2 * s.tokens_local * s.kv_lora_rank);
}

// The shared RoPE key gathered from the sequence-parallel region (forward), its gradient reduce-scattered back
// (backward): tokens x rope_d in bf16, under SP only (without SP every rank computes it on all rows).
void shared_key_collective(Emitter& e, bool backward) {
  const RankShapes& s = e.shapes();
  if (!s.sp) return;
  e.emit(tp_op(backward ? OpKind::reduce_scatter : OpKind::all_gather, backward ? OpRole::tp_scatter : OpRole::tp_gather,
               s, s.tokens * s.rope_d * 2, OpRole::mla_kv_down,
               backward ? LinearTensor::output_gradient : LinearTensor::output));
}

// TP 1: one step per op in executor/gpu/mla_attention.cpp's order (executor/mla_steps.hpp binds them).
void queries_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  if (s.q_lora_rank == 0) {
    column_parallel_forward(e, OpRole::mla_q_up, q_width(s), s.h);
    return;
  }
  duplicated_forward(e, OpRole::mla_q_down, s.q_lora_rank, s.h);
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
  duplicated_backward(e, OpRole::mla_q_down, s.q_lora_rank, s.h);
}

void keys_values_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  duplicated_forward(e, OpRole::mla_kv_down, ckv_width(s), s.h);
  e.emit(latent_copy(s));
  e.emit(latent_norm(s, OpRole::mla_kv_norm, false, s.kv_lora_rank));
  column_parallel_forward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
}

void keys_values_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  column_parallel_backward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
  e.emit(latent_norm(s, OpRole::mla_kv_norm, true, s.kv_lora_rank));
  e.emit(latent_copy(s));
  duplicated_backward(e, OpRole::mla_kv_down, ckv_width(s), s.h);
}

// TP > 1: Megatron's order (get_query_key_value_tensors): both down projections, the shared key's gather, both
// norms, both up projections; backward its reverse.
void projections_tp_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  const bool latent_q = s.q_lora_rank > 0;
  if (latent_q) duplicated_forward(e, OpRole::mla_q_down, s.q_lora_rank, s.h);
  duplicated_forward(e, OpRole::mla_kv_down, ckv_width(s), s.h);
  shared_key_collective(e, false);
  if (latent_q) e.emit(latent_norm(s, OpRole::mla_q_norm, false, s.q_lora_rank));
  e.emit(latent_copy(s));
  e.emit(latent_norm(s, OpRole::mla_kv_norm, false, s.kv_lora_rank));
  column_parallel_forward(e, OpRole::mla_q_up, q_width(s), latent_q ? s.q_lora_rank : s.h);
  column_parallel_forward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
}

void projections_tp_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  const bool latent_q = s.q_lora_rank > 0;
  column_parallel_backward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
  column_parallel_backward(e, OpRole::mla_q_up, q_width(s), latent_q ? s.q_lora_rank : s.h);
  e.emit(latent_norm(s, OpRole::mla_kv_norm, true, s.kv_lora_rank));
  e.emit(latent_copy(s));
  if (latent_q) e.emit(latent_norm(s, OpRole::mla_q_norm, true, s.q_lora_rank));
  shared_key_collective(e, true);
  duplicated_backward(e, OpRole::mla_kv_down, ckv_width(s), s.h);
  if (latent_q) duplicated_backward(e, OpRole::mla_q_down, s.q_lora_rank, s.h);
}

// RoPE over every head's query rope part and the one shared key's.
Op rope(const RankShapes& s, bool backward) {
  return Emitter::rows_cols(backward ? OpKind::rope_backward : OpKind::rope_forward, OpRole::rope, s.tokens,
                            (s.heads + 1) * s.rope_d);
}

// What Megatron's qkv_up_proj_and_rope_apply runs from the normalised latents: both up projections (their SP gathers
// included), RoPE and the keys' expansion to the heads.
void up_projections_forward(Emitter& e, const Op& expand) {
  const RankShapes& s = e.shapes();
  column_parallel_forward(e, OpRole::mla_q_up, q_width(s), s.q_lora_rank > 0 ? s.q_lora_rank : s.h);
  column_parallel_forward(e, OpRole::mla_kv_up, kv_width(s), s.kv_lora_rank);
  e.emit(rope(s, false));
  e.emit(expand);
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
    if (tp_active(s)) {
      projections_tp_forward(e);
    } else {
      queries_forward(e);
      keys_values_forward(e);
    }
    e.emit(rope(s, false));
    e.emit(expand);
    attention(e, false);
    return;
  }
  // mla_up_proj (multi_latent_attention.py:983): the up projections and RoPE run again, and the keys' expansion with
  // them, before core attention's backward (its recompute, if any, reads them).
  if (s.recomputes(RecomputeModule::mla_up_proj)) e.recompute([&] { up_projections_forward(e, expand); });
  if (s.recomputes(RecomputeModule::core_attn)) e.recompute([&] { attention(e, false); });
  attention(e, true);
  e.emit(expand);
  e.emit(rope(s, true));
  if (tp_active(s)) {
    projections_tp_backward(e);
    return;
  }
  keys_values_backward(e);
  queries_backward(e);
}

}  // namespace twin::lowering
