// The ops of one transformer layer, the embedding and the output layer, as Megatron-LM issues them with
// tensor parallelism (and sequence parallelism), ring-attention context parallelism and MoE experts.
// Column-parallel linears: [SP all-gather] GEMM forward; backward re-gathers the input for wgrad (SP),
// runs dgrad, reduces the input gradient (reduce-scatter with SP, all-reduce without) while wgrad runs.
// Row-parallel linears: GEMM then reduce-scatter (SP) or all-reduce; backward all-gathers the gradient (SP).
// With Transformer Engine's userbuffers (framework.tp_comm_overlap) the SP collective beside a GEMM is
// pipelined with the GEMM's chunks, as initialize_ub's defaults run it: an all-gather in ring steps on the
// copy engines, a reduce-scatter per chunk on a few SMs, backward's collectives "bulk" beside the GEMM
// that does not need them (sim/engine.hpp: how each slows compute); without gradient accumulation fusion each
// weight gradient is added into the fp32 main gradient by a kernel of its own.
#include <cmath>
#include <vector>

#include "strategies/lowering_emitter.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::lowering {
namespace {

bool tp_active(const RankShapes& s) { return s.tp > 1; }
std::int64_t activation_bytes(const RankShapes& s) { return s.tokens * s.h * 2; }  // bf16 T x h
std::int64_t residual_bytes(const RankShapes& s) { return 3 * s.tokens_local * s.h * 2; }  // 2 reads, 1 write

// A TP collective moving `tensor` of the linear `linear`.
Op tp_op(OpKind kind, OpRole role, const RankShapes& s, std::int64_t bytes, OpRole linear, LinearTensor tensor) {
  return Emitter::serving(Emitter::collective(kind, role, Stream::tp_comm, GroupKind::tensor, s.tp, bytes), linear,
                          tensor);
}

// A TP collective Transformer Engine's userbuffers run beside a GEMM ("bulk": on a few SMs).
Op userbuffers_op(OpKind kind, OpRole role, const RankShapes& s, std::int64_t bytes, OpRole linear,
                  LinearTensor tensor) {
  Op op = tp_op(kind, role, s, bytes, linear, tensor);
  op.comm_kernel = CommKernel::userbuffers_sm;
  return op;
}

// One step of a TP ring: every rank passes one rank's shard of `tensor` of `linear` to its neighbour, with
// the copy engines ("ring_exchange").
Op tp_ring_step(OpRole role, const RankShapes& s, OpRole linear, LinearTensor tensor) {
  Op op = Emitter::serving(
      Emitter::collective(OpKind::send, role, Stream::tp_comm, GroupKind::tensor, s.tp, activation_bytes(s) / s.tp),
      linear, tensor);
  op.comm_kernel = CommKernel::userbuffers_copy_engine;
  return op;
}

// One of `splits` row chunks of a userbuffers GEMM (priced as its share of the whole: GemmShape::split).
Op gemm_chunk(OpRole role, GemmPass pass, std::int64_t rows, int splits, std::int64_t n, std::int64_t k) {
  Op op = Emitter::gemm(role, pass, rows / splits, n, k);
  op.gemm.split = splits;
  return op;
}

// Userbuffers all-gather + GEMM ("ring_exchange"): tp - 1 ring steps bring the other ranks' shards of the
// GEMM's input (`gathered`: the linear's input forward, its output gradient backward) while the GEMM runs in
// tp chunks of rows, the chunk of this rank's own shard first and chunk i once step i has arrived. Returns the
// last step (what needs the whole gathered input waits for it).
OpIndex gathered_gemm(Emitter& e, OpRole role, GemmPass pass, LinearTensor gathered, std::int64_t n, std::int64_t k) {
  const RankShapes& s = e.shapes();
  const OpIndex input = e.chain;
  std::vector<OpIndex> steps;
  for (int step = 1; step < s.tp; ++step)
    steps.push_back(e.emit_after(tp_ring_step(OpRole::tp_gather, s, role, gathered), step == 1 ? input : kNoOp));
  for (int chunk = 0; chunk < s.tp; ++chunk) {
    if (chunk > 0) e.pending_wait = steps[chunk - 1];
    e.emit(gemm_chunk(role, pass, s.tokens, s.tp, n, k));
  }
  return steps.back();
}

// Userbuffers GEMM + reduce-scatter ("pipeline", initialize_ub's default of 4 splits): the GEMM in 4
// chunks of rows, each chunk's partial sums reduce-scattered by a userbuffers kernel while the next chunk
// computes; what follows waits for the last reduce-scatter.
constexpr int kPipelineSplits = 4;

void scattered_gemm(Emitter& e, OpRole role, std::int64_t n, std::int64_t k) {
  const RankShapes& s = e.shapes();
  OpIndex last_scatter = kNoOp;
  for (int chunk = 0; chunk < kPipelineSplits; ++chunk) {
    const OpIndex gemm = e.emit(gemm_chunk(role, GemmPass::forward, s.tokens, kPipelineSplits, n, k));
    last_scatter = e.emit_after(userbuffers_op(OpKind::reduce_scatter, OpRole::tp_scatter, s,
                                               activation_bytes(s) / kPipelineSplits, role, LinearTensor::output),
                                gemm);
  }
  e.pending_wait = last_scatter;
}

// Without gradient accumulation fusion the weight-gradient GEMM writes a 16-bit gradient and a kernel adds
// it into the fp32 main gradient: read 2 bytes, read and write 4 (Megatron's main_grad.add_ hook).
void accumulate_gradient(Emitter& e, OpIndex wgrad, std::int64_t parameters) {
  if (e.shapes().gradient_accumulation_fusion) return;
  e.emit_after(Emitter::moved(OpKind::elementwise, OpRole::grad_accumulation, parameters * (2 + 2 * 4)), wgrad);
}

void column_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.tp_comm_overlap) {
    gathered_gemm(e, role, GemmPass::forward, LinearTensor::input, n_out, k_in);
    return;
  }
  if (tp_active(s) && s.sp)
    e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), role, LinearTensor::input));
  e.emit(Emitter::gemm(role, GemmPass::forward, s.tokens, n_out, k_in));
}

void row_parallel_forward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.tp_comm_overlap) {
    scattered_gemm(e, role, n_out, k_in);
    return;
  }
  e.emit(Emitter::gemm(role, GemmPass::forward, s.tokens, n_out, k_in));
  if (tp_active(s))
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s), role, LinearTensor::output)
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s), role, LinearTensor::output));
}

void column_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  // With userbuffers both collectives are "bulk": the gather beside dgrad, the reduce-scatter beside wgrad.
  const auto collective = s.tp_comm_overlap ? userbuffers_op : tp_op;
  OpIndex gathered_input = kNoOp;
  if (tp_active(s) && s.sp)
    gathered_input = e.emit_after(
        collective(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), role, LinearTensor::input), e.chain);
  const OpIndex dgrad = e.emit(Emitter::gemm(role, GemmPass::input_gradient, s.tokens, k_in, n_out));
  if (tp_active(s))
    e.emit(s.sp ? collective(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s), role,
                             LinearTensor::input_gradient)
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s), role,
                        LinearTensor::input_gradient));
  const OpIndex wgrad = e.emit_after(Emitter::gemm(role, GemmPass::weight_gradient, k_in, n_out, s.tokens), dgrad);
  if (gathered_input != kNoOp) e.depend(gathered_input, wgrad);
  accumulate_gradient(e, wgrad, k_in * n_out);
}

void row_parallel_backward(Emitter& e, OpRole role, std::int64_t n_out, std::int64_t k_in) {
  const RankShapes& s = e.shapes();
  OpIndex dgrad = kNoOp, gathered = kNoOp;
  if (tp_active(s) && s.tp_comm_overlap) {
    gathered = gathered_gemm(e, role, GemmPass::input_gradient, LinearTensor::output_gradient, k_in, n_out);
    dgrad = e.chain;
  } else {
    if (tp_active(s) && s.sp)
      e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), role, LinearTensor::output_gradient));
    dgrad = e.emit(Emitter::gemm(role, GemmPass::input_gradient, s.tokens, k_in, n_out));
  }
  const OpIndex wgrad = e.emit(Emitter::gemm(role, GemmPass::weight_gradient, k_in, n_out, s.tokens));
  e.depend(gathered, wgrad);
  accumulate_gradient(e, wgrad, k_in * n_out);
  e.chain = dgrad;
}

// Attention of seq_q queries against seq_kv keys (the queries the last of them when causal).
Op attention_op(const RankShapes& s, bool backward, std::int64_t seq_q, std::int64_t seq_kv, bool causal) {
  Op op;
  op.kind = backward ? OpKind::attention_backward : OpKind::attention_forward;
  op.role = OpRole::core_attention;
  op.attention = {s.b, s.heads, s.groups, seq_q, seq_kv, s.d, causal};
  op.flops = 4.0 * s.b * s.heads * seq_q * seq_kv * s.d * attention_score_fraction(op.attention) *
             (backward ? 2.5 : 1.0);
  return op;
}

// Context parallelism with the keys and values all-gathered (cp_comm_type all_gather): the rank's two
// query chunks of s/2 (Megatron's load-balanced sharding: chunks r and 2cp-1-r of 2cp) each run against
// the keys before them, (r+1) and (2cp-r) chunks; together 2cp+1 chunks of keys. The ranks of a class do
// the same work in total, so the class runs the mean split, cp and cp+1 chunks. Backward gathers again
// and reduce-scatters the key and value gradients.
void all_gathered_attention(Emitter& e, bool backward) {
  const RankShapes& s = e.shapes();
  const std::int64_t kv_bytes = s.b * s.s * 2 * s.groups * s.d * 2;  // this rank's K and V, bf16
  const auto cp_op = [&](OpKind kind) {
    return Emitter::collective(kind, OpRole::cp_exchange, Stream::cp_comm, GroupKind::context, s.cp, kv_bytes * s.cp);
  };
  e.emit(cp_op(OpKind::all_gather));
  const std::int64_t chunk = s.s / 2;
  e.emit(attention_op(s, backward, chunk, chunk * s.cp, true));
  e.emit(attention_op(s, backward, chunk, chunk * (s.cp + 1), true));
  if (backward) e.emit(cp_op(OpKind::reduce_scatter));
}

// Core attention. With CP it is a ring: cp blocks on compute, the KV block travelling one neighbour on
// per step while the previous block computes. With Megatron's load-balanced sharding (2*cp chunks)
// the diagonal block is causal and every other block is half the queries against all local keys.
// Backward sends K, V and their gradients each step.
void core_attention(Emitter& e, bool backward) {
  const RankShapes& s = e.shapes();
  if (s.cp == 1) {
    e.emit(attention_op(s, backward, s.s, s.s, true));
    return;
  }
  if (s.cp_all_gather) {
    all_gathered_attention(e, backward);
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
    const OpIndex compute = block == 0 ? e.emit(attention_op(s, backward, s.s, s.s, true))
                                       : e.emit(attention_op(s, backward, s.s / 2, s.s, false));
    if (previous_send != kNoOp) e.depend(previous_send, compute);
    previous_send = send;
  }
}

void moe_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  Op router = Emitter::gemm(OpRole::router, GemmPass::forward, s.tokens_local, s.experts_total, s.h);
  router.kind = OpKind::moe_router;
  e.emit(router);
  const auto a2a = [&](OpRole role) {
    return Emitter::collective(OpKind::all_to_all, role, Stream::ep_comm, GroupKind::expert, s.ep, s.dispatch_bytes);
  };
  const std::int64_t permute_bytes = s.permute_bytes;
  if (s.ep > 1) e.emit(a2a(OpRole::dispatch));
  e.emit(Emitter::moved(OpKind::moe_permute, OpRole::dispatch, permute_bytes));
  const int count = static_cast<int>(s.experts_local);
  e.emit(Emitter::gemm(OpRole::expert_fc1, GemmPass::forward, s.expert_tokens, s.moe_fc1_width, s.h, count));
  e.emit(Emitter::rows_cols(OpKind::activation_forward, OpRole::expert_activation, s.expert_tokens * count, s.moe_ffn));
  e.emit(Emitter::gemm(OpRole::expert_fc2, GemmPass::forward, s.expert_tokens, s.h, s.moe_ffn, count));
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
  const OpIndex fc2_dgrad =
      e.emit(Emitter::gemm(OpRole::expert_fc2, GemmPass::input_gradient, s.expert_tokens, s.moe_ffn, s.h, count));
  e.emit(Emitter::gemm(OpRole::expert_fc2, GemmPass::weight_gradient, s.moe_ffn, s.h, s.expert_tokens, count));
  e.chain = fc2_dgrad;
  e.emit(Emitter::rows_cols(OpKind::activation_backward, OpRole::expert_activation, s.expert_tokens * count, s.moe_ffn));
  const OpIndex fc1_dgrad = e.emit(
      Emitter::gemm(OpRole::expert_fc1, GemmPass::input_gradient, s.expert_tokens, s.h, s.moe_fc1_width, count));
  e.emit(Emitter::gemm(OpRole::expert_fc1, GemmPass::weight_gradient, s.h, s.moe_fc1_width, s.expert_tokens, count));
  e.chain = fc1_dgrad;
  e.emit(Emitter::moved(OpKind::moe_permute, OpRole::dispatch, permute_bytes));
  if (s.ep > 1) e.emit(a2a(OpRole::dispatch));
  const OpIndex router_dgrad =
      e.emit(Emitter::gemm(OpRole::router, GemmPass::input_gradient, s.tokens_local, s.h, s.experts_total));
  e.emit(Emitter::gemm(OpRole::router, GemmPass::weight_gradient, s.h, s.experts_total, s.tokens_local));
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
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s), OpRole::embedding,
                        LinearTensor::output)
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s), OpRole::embedding,
                        LinearTensor::output));
}

void emit_embedding_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  if (tp_active(s) && s.sp)
    e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), OpRole::embedding,
                 LinearTensor::output_gradient));
  e.emit(Emitter::rows_cols(OpKind::embedding_backward, OpRole::embedding, s.tokens, s.h));
}

// Vocab-parallel cross-entropy: the max and the sum of exponentials are all-reduced over TP
// (2 fp32 values per token). Unfused, the passes over fp32 logits beyond one fused kernel's are an
// elementwise op of their own (core/framework.hpp: 36 bytes per logit forward, 10 backward).
constexpr std::int64_t kUnfusedLossForwardBytes = 36, kUnfusedLossBackwardBytes = 10;

void emit_head_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  e.emit(Emitter::rows_cols(OpKind::norm_forward, OpRole::final_norm, s.tokens_local, s.h));
  column_parallel_forward(e, OpRole::output_projection, s.vocab, s.h);
  e.emit(Emitter::rows_cols(OpKind::loss_forward, OpRole::loss, s.tokens, s.vocab));
  if (!s.cross_entropy_loss_fusion)
    e.emit(Emitter::moved(OpKind::elementwise, OpRole::loss, kUnfusedLossForwardBytes * s.tokens * s.vocab));
  if (tp_active(s))
    e.loss_complete[e.micro_batch()] =
        e.emit(Emitter::collective(OpKind::all_reduce, OpRole::loss, Stream::tp_comm, GroupKind::tensor, s.tp,
                                   2 * s.tokens * 4));
}

void emit_head_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.set_layer(-1);
  if (auto loss = e.loss_complete.find(e.micro_batch()); loss != e.loss_complete.end()) e.pending_wait = loss->second;
  e.emit(Emitter::rows_cols(OpKind::loss_backward, OpRole::loss, s.tokens, s.vocab));
  if (!s.cross_entropy_loss_fusion)
    e.emit(Emitter::moved(OpKind::elementwise, OpRole::loss, kUnfusedLossBackwardBytes * s.tokens * s.vocab));
  column_parallel_backward(e, OpRole::output_projection, s.vocab, s.h);
  e.emit(Emitter::rows_cols(OpKind::norm_backward, OpRole::final_norm, s.tokens_local, s.h));
}

}  // namespace twin::lowering
