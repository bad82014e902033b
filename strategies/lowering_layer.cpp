// The ops of one transformer layer, the embedding and the output layer, as Megatron-LM issues them with
// tensor parallelism (and sequence parallelism), ring-attention context parallelism and MoE experts.
// Column-parallel linears: [SP all-gather] GEMM forward; backward re-gathers the input for wgrad (SP),
// runs dgrad, reduces the input gradient (reduce-scatter with SP, all-reduce without) while wgrad runs.
// Row-parallel linears: GEMM then reduce-scatter (SP) or all-reduce; backward all-gathers the gradient (SP).
#include <cmath>

#include "strategies/lowering_emitter.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::lowering {
namespace {

bool tp_active(const RankShapes& s) { return s.tp > 1; }
std::int64_t activation_bytes(const RankShapes& s) { return s.tokens * s.h * 2; }  // bf16 T x h
std::int64_t residual_bytes(const RankShapes& s) { return 3 * s.tokens_local * s.h * 2; }  // 2 reads, 1 write

Op tp_op(OpKind kind, OpRole role, const RankShapes& s, std::int64_t bytes) {
  return Emitter::collective(kind, role, Stream::tp_comm, GroupKind::tensor, s.tp, bytes);
}

void column_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.sp) e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s)));
  e.emit(Emitter::gemm(role, s.tokens, n_out, k_in));
}

void row_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  e.emit(Emitter::gemm(role, s.tokens, n_out, k_in));
  if (tp_active(s))
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s))
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s)));
}

void column_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  OpIndex gathered_input = kNoOp;
  if (tp_active(s) && s.sp)
    gathered_input = e.emit_after(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s)), e.chain);
  const OpIndex dgrad = e.emit(Emitter::gemm(role, s.tokens, k_in, n_out));
  if (tp_active(s))
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s))
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s)));
  const OpIndex wgrad = e.emit_after(Emitter::gemm(role, k_in, n_out, s.tokens), dgrad);
  if (gathered_input != kNoOp) e.depend(gathered_input, wgrad);
}

void row_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.sp) e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s)));
  const OpIndex dgrad = e.emit(Emitter::gemm(role, s.tokens, k_in, n_out));
  e.emit(Emitter::gemm(role, k_in, n_out, s.tokens));
  e.chain = dgrad;
}

Op attention_op(const RankShapes& s, bool backward, std::int64_t seq_q, bool causal) {
  Op op;
  op.kind = backward ? OpKind::attention_backward : OpKind::attention_forward;
  op.role = OpRole::core_attention;
  op.attention = {s.b, s.heads, s.groups, seq_q, s.s, s.d, causal};
  op.flops = 4.0 * s.b * s.heads * seq_q * s.s * s.d * (causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
  return op;
}

// Core attention. With CP it is a ring: cp blocks on compute, the KV block travelling one neighbour on
// per step while the previous block computes. With Megatron's load-balanced sharding (2*cp chunks)
// the diagonal block is causal and every other block is half the queries against all local keys.
// Backward sends K, V and their gradients each step.
void core_attention(Emitter& e, bool backward) {
  const RankShapes& s = e.shapes();
  if (s.cp == 1) {
    e.emit(attention_op(s, backward, s.s, true));
    return;
  }
  const std::int64_t kv_bytes = s.b * s.s * 2 * s.groups * s.d * 2;
  const std::int64_t step_bytes = backward ? 2 * kv_bytes : kv_bytes;
  const OpIndex kv_ready = e.chain;
  OpIndex previous_send = kNoOp;
  for (int block = 0; block < s.cp; ++block) {
    OpIndex send = kNoOp;
    if (block < s.cp - 1)
      send = e.emit_after(Emitter::collective(OpKind::send, OpRole::cp_exchange, Stream::cp_comm,
                                              GroupKind::context, s.cp, step_bytes),
                          block == 0 ? kv_ready : kNoOp);
    const OpIndex compute = block == 0 ? e.emit(attention_op(s, backward, s.s, true))
                                       : e.emit(attention_op(s, backward, s.s / 2, false));
    if (previous_send != kNoOp) e.depend(previous_send, compute);
    previous_send = send;
  }
}

void moe_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  Op router = Emitter::gemm(OpRole::router, s.tokens_local, s.experts_total, s.h);
  router.kind = OpKind::moe_router;
  e.emit(router);
  const auto a2a = [&](OpRole role) {
    return Emitter::collective(OpKind::all_to_all, role, Stream::ep_comm, GroupKind::expert, s.ep, s.dispatch_bytes);
  };
  const std::int64_t permute_bytes = s.permute_bytes;
  if (s.ep > 1) e.emit(a2a(OpRole::dispatch));
  e.emit(Emitter::moved(OpKind::moe_permute, OpRole::dispatch, permute_bytes));
  const int count = static_cast<int>(s.experts_local);
  e.emit(Emitter::gemm(OpRole::expert_fc1, s.expert_tokens, s.moe_fc1_width, s.h, count));
  e.emit(Emitter::rows_cols(OpKind::activation_forward, OpRole::expert_activation, s.expert_tokens * count, s.moe_ffn));
  e.emit(Emitter::gemm(OpRole::expert_fc2, s.expert_tokens, s.h, s.moe_ffn, count));
  e.emit(Emitter::moved(OpKind::moe_unpermute, OpRole::combine, permute_bytes));
  if (s.ep > 1) e.emit(a2a(OpRole::combine));
}

void moe_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  const auto a2a = [&](OpRole role) {
    return Emitter::collective(OpKind::all_to_all, role, Stream::ep_comm, GroupKind::expert, s.ep, s.dispatch_bytes);
  };
  const std::int64_t permute_bytes = s.permute_bytes;
  const int count = static_cast<int>(s.experts_local);
  if (s.ep > 1) e.emit(a2a(OpRole::combine));
  e.emit(Emitter::moved(OpKind::moe_unpermute, OpRole::combine, permute_bytes));
  const OpIndex fc2_dgrad = e.emit(Emitter::gemm(OpRole::expert_fc2, s.expert_tokens, s.moe_ffn, s.h, count));
  e.emit(Emitter::gemm(OpRole::expert_fc2, s.moe_ffn, s.h, s.expert_tokens, count));
  e.chain = fc2_dgrad;
  e.emit(Emitter::rows_cols(OpKind::activation_backward, OpRole::expert_activation, s.expert_tokens * count, s.moe_ffn));
  const OpIndex fc1_dgrad = e.emit(Emitter::gemm(OpRole::expert_fc1, s.expert_tokens, s.h, s.moe_fc1_width, count));
  e.emit(Emitter::gemm(OpRole::expert_fc1, s.h, s.moe_fc1_width, s.expert_tokens, count));
  e.chain = fc1_dgrad;
  e.emit(Emitter::moved(OpKind::moe_permute, OpRole::dispatch, permute_bytes));
  if (s.ep > 1) e.emit(a2a(OpRole::dispatch));
  const OpIndex router_dgrad = e.emit(Emitter::gemm(OpRole::router, s.tokens_local, s.h, s.experts_total));
  e.emit(Emitter::gemm(OpRole::router, s.h, s.experts_total, s.tokens_local));
  e.chain = router_dgrad;
}

}  // namespace

void emit_layer_forward(Emitter& e, const ModelConfig& model, int layer) {
  const RankShapes& s = e.shapes();
  e.set_layer(layer);
  e.emit(Emitter::rows_cols(OpKind::norm_forward, OpRole::input_norm, s.tokens_local, s.h));
  column_parallel_forward(e, OpRole::qkv_projection, s.qkv_width, s.h);
  if (s.rope) e.emit(Emitter::rows_cols(OpKind::rope_forward, OpRole::rope, s.tokens, (s.heads + s.groups) * s.d));
  core_attention(e, false);
  row_parallel_forward(e, OpRole::attention_projection, s.h, s.heads * s.d);
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::attention_residual, residual_bytes(s)));
  e.emit(Emitter::rows_cols(OpKind::norm_forward, OpRole::mlp_norm, s.tokens_local, s.h));
  if (model.is_moe_layer(layer)) {
    moe_forward(e);
  } else {
    column_parallel_forward(e, OpRole::fc1, s.fc1_width, s.h);
    e.emit(Emitter::rows_cols(OpKind::activation_forward, OpRole::activation, s.tokens, s.ffn));
    row_parallel_forward(e, OpRole::fc2, s.h, s.ffn);
  }
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::mlp_residual, residual_bytes(s)));
}

void emit_layer_backward(Emitter& e, const ModelConfig& model, int layer) {
  const RankShapes& s = e.shapes();
  if (s.recompute == Recompute::full) {  // the whole forward again, TP collectives included
    e.set_phase(Phase::forward);
    e.set_recomputed(true);
    emit_layer_forward(e, model, layer);
    e.set_recomputed(false);
    e.set_phase(Phase::backward);
  }
  e.set_layer(layer);
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::mlp_residual, residual_bytes(s)));
  if (model.is_moe_layer(layer)) {
    moe_backward(e);
  } else {
    row_parallel_backward(e, OpRole::fc2, s.h, s.ffn);
    e.emit(Emitter::rows_cols(OpKind::activation_backward, OpRole::activation, s.tokens, s.ffn));
    column_parallel_backward(e, OpRole::fc1, s.fc1_width, s.h);
  }
  e.emit(Emitter::rows_cols(OpKind::norm_backward, OpRole::mlp_norm, s.tokens_local, s.h));
  e.emit(Emitter::moved(OpKind::elementwise, OpRole::attention_residual, residual_bytes(s)));
  row_parallel_backward(e, OpRole::attention_projection, s.h, s.heads * s.d);
  if (s.recompute == Recompute::selective) {
    e.set_phase(Phase::forward);
    e.set_recomputed(true);
    core_attention(e, false);
    e.set_recomputed(false);
    e.set_phase(Phase::backward);
  }
  core_attention(e, true);
  if (s.rope) e.emit(Emitter::rows_cols(OpKind::rope_backward, OpRole::rope, s.tokens, (s.heads + s.groups) * s.d));
  column_parallel_backward(e, OpRole::qkv_projection, s.qkv_width, s.h);
  e.emit(Emitter::rows_cols(OpKind::norm_backward, OpRole::input_norm, s.tokens_local, s.h));
}

// Vocab-parallel embedding: every TP rank looks up its vocabulary shard for all tokens, then the
// partial rows are summed (all-reduce) or summed and scattered by sequence (SP).
void emit_embedding_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  e.emit(Emitter::rows_cols(OpKind::embedding_forward, OpRole::embedding, s.tokens, s.h));
  if (tp_active(s))
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s))
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s)));
}

void emit_embedding_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  if (tp_active(s) && s.sp) e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s)));
  e.emit(Emitter::rows_cols(OpKind::embedding_backward, OpRole::embedding, s.tokens, s.h));
}

// Vocab-parallel cross-entropy: the max and the sum of exponentials are all-reduced over TP
// (2 fp32 values per token).
void emit_head_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  e.emit(Emitter::rows_cols(OpKind::norm_forward, OpRole::final_norm, s.tokens_local, s.h));
  column_parallel_forward(e, OpRole::output_projection, s.vocab, s.h);
  e.emit(Emitter::rows_cols(OpKind::loss_forward, OpRole::loss, s.tokens, s.vocab));
  if (tp_active(s)) e.loss_complete[e.micro_batch()] = e.emit(tp_op(OpKind::all_reduce, OpRole::loss, s, 2 * s.tokens * 4));
}

void emit_head_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  if (auto loss = e.loss_complete.find(e.micro_batch()); loss != e.loss_complete.end()) e.pending_wait = loss->second;
  e.emit(Emitter::rows_cols(OpKind::loss_backward, OpRole::loss, s.tokens, s.vocab));
  column_parallel_backward(e, OpRole::output_projection, s.vocab, s.h);
  e.emit(Emitter::rows_cols(OpKind::norm_backward, OpRole::final_norm, s.tokens_local, s.h));
}

}  // namespace twin::lowering
