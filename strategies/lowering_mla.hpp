// The ops of a multi-latent attention block (core/layer.hpp's BlockKind::mla_attention): at TP 1 one per step that
// executor/gpu/mla_attention.cpp runs; at TP > 1 (with or without SP) the ops Megatron-LM issues on one rank, in its
// order. CP 1 only (strategies/validity.cpp refuses MLA under CP).
#pragma once
#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

// Forward at TP 1: the query's down projection, its latent's norm and up projection (or the direct query projection), the
// keys' and values' down projection, the latent's copy out of its rows, its norm and up projection, RoPE on the rope
// parts, the shared RoPE key's broadcast to the heads, then `attention` (core attention with d_qk = nope + rope,
// d_v = v_head_dim). At TP > 1: both down projections (whole, on the rank's rows), the shared RoPE key's SP gather,
// the latents' norms, both up projections (column-parallel: the latents gathered under SP), then as at TP 1.
// Backward: the same in reverse, attention's recompute first under selective recompute.
void emit_mla_attention(Emitter& e, bool backward, void (*attention)(Emitter& e, bool backward));

// Bytes the heads' expansion (forward) or its gradient's sum over heads (backward) moves: the up projection's keys
// and values and the shared RoPE key in, each head's key and value out (backward the other way).
std::int64_t mla_expand_bytes(const RankShapes& s);

}  // namespace twin::lowering
