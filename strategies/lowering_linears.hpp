// Internal to the lowering: the ops of a tensor-parallel linear layer (column- or row-parallel, with SP and
// Transformer Engine's userbuffers where the rank's shapes say so), forward and backward.
#pragma once
#include <cstdint>

#include "strategies/lowering_emitter.hpp"

namespace twin::lowering {

inline bool tp_active(const RankShapes& s) { return s.tp > 1; }
// A bf16 activation of all T tokens by h: what a TP collective around a linear moves.
inline std::int64_t activation_bytes(const RankShapes& s) { return s.tokens * s.h * 2; }

// A TP collective moving `tensor` of the linear `linear`.
Op tp_op(OpKind kind, OpRole role, const RankShapes& s, std::int64_t bytes, OpRole linear, LinearTensor tensor);

// A GEMM of the linear `role` computing `pass`: on FP8 operands where the layer runs its linears in FP8.
Op linear_gemm(const Emitter& e, OpRole role, GemmPass pass, std::int64_t m, std::int64_t n, std::int64_t k);
// Where the layer runs its linears in FP8: the cast of `tensor` (rows x cols) of the linear `role` (an fp8_cast op).
void cast_to_fp8(Emitter& e, OpRole role, LinearTensor tensor, std::int64_t rows, std::int64_t cols);

// The linear `role` with forward GEMM width n_out from k_in (per TP rank).
// Without gradient accumulation fusion: after the weight-gradient GEMM `wgrad` of `role` (its `parameters` weights, a
// grouped GEMM's over all its problems), the op that adds its 16-bit product into the main gradient; nothing with it.
void accumulate_gradient(Emitter& e, OpIndex wgrad, OpRole role, std::int64_t parameters);
void column_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in);
void row_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in);
// With Emitter::defers_weight_gradient set, the data gradient alone: the weight gradient is left to
// column_parallel_deferred_weight_gradient.
void column_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in);
// A weight gradient column_parallel_backward left behind, run later (Megatron-Core's drain_embedding_wgrad_compute):
// under SP its input gathered again by NCCL after `gather_after`, then the GEMM after the chain, which it becomes.
void column_parallel_deferred_weight_gradient(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in,
                                              OpIndex gather_after);
void row_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in);
// A linear whole on every TP rank (Transformer Engine's parallel_mode "duplicated", MLA's down projections), run on
// the rank's own rows (tokens / tp under SP): no TP collective; its weight gradient is summed over TP once a step
// (strategies/lowering_pipeline.cpp), not here.
void duplicated_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in);
void duplicated_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in);

}  // namespace twin::lowering
