// The ops of one transformer layer, the embedding and the output layer, as Megatron-LM issues them with
// tensor parallelism (and sequence parallelism), ring-attention context parallelism and MoE experts: each
// walks its blocks of the layer description (core/layer.hpp), forward in order and backward in reverse.
// The linears' ops (SP collectives, userbuffers) are strategies/lowering_linears.cpp's.
#include <cmath>
#include <vector>

#include "core/layer.hpp"
#include "strategies/context_ring.hpp"
#include "strategies/lowering_linears.hpp"
#include "strategies/lowering_mla.hpp"
#include "strategies/lowering_moe.hpp"
#include "strategies/pytorch_fsdp2.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::lowering {
namespace {

// Attention of seq_q queries against seq_kv keys (the queries the last of them when causal), over the layer's
// window when it has one. A ring's off-diagonal blocks (not causal) are priced whole: which of their keys a window
// keeps depends on the step, and windowed layers under CP are priced high by that much.
Op attention_op(const Emitter& e, bool backward, std::int64_t seq_q, std::int64_t seq_kv, bool causal,
                ContextForm form = ContextForm::none) {
  return Emitter::attention(e.shapes(), e.attention_window(), backward, seq_q, seq_kv, causal, form);
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
    Op op = Emitter::collective(kind, OpRole::cp_exchange, Stream::cp_comm, GroupKind::context, s.cp, kv_bytes * s.cp);
    op.context_form = ContextForm::all_gather;
    return op;
  };
  e.emit(cp_op(OpKind::all_gather));
  const std::int64_t chunk = s.s / 2;
  e.emit(attention_op(e, backward, chunk, chunk * s.cp, true, ContextForm::all_gather));
  e.emit(attention_op(e, backward, chunk, chunk * (s.cp + 1), true, ContextForm::all_gather));
  if (backward) e.emit(cp_op(OpKind::reduce_scatter));
}

// Core attention. With CP it is a ring (Megatron's cp_comm_type p2p, Transformer Engine's
// AttnFuncWithCPAndKVP2P): cp blocks on compute, step k against the keys and values of the CP rank k places
// before. With the load-balanced sharding (chunks r and 2cp-1-r of 2cp) the diagonal block is causal and every
// other block is half the queries against all local keys, or all queries against half of them.
// Forward: the KV block travels one neighbour on per step while the previous block computes.
// Each forward block is merged into the output by an op of its own. Backward: the KV block travels ahead as
// forward, and the key-value gradient travels one step behind it (exchange k carries what steps up to k - 1
// added; a rank adds its share of block k - 1, an op on compute, before passing it on), so a step's exchange waits
// for the block before it; a last exchange brings each rank's completed gradient home, and the layer's next op
// waits for it.
OpIndex ring_exchange(Emitter& e, int step, std::int64_t bytes, OpIndex after) {
  const RankShapes& s = e.shapes();
  Op send = Emitter::collective(OpKind::send, OpRole::cp_exchange, Stream::cp_comm, GroupKind::context, s.cp, bytes);
  send.ring_step = static_cast<std::int16_t>(step);
  send.context_form = ContextForm::ring;
  send.transfer = Transfer::context_ring;
  return e.emit_after(send, after);
}

OpIndex ring_block(Emitter& e, int step, bool backward) {
  const RankShapes& s = e.shapes();
  Op block = step == 0 ? attention_op(e, backward, s.s, s.s, true, ContextForm::ring)
                        : attention_op(e, backward, s.s / 2, s.s, false, ContextForm::ring);
  block.ring_step = static_cast<std::int16_t>(step);
  return e.emit(block);
}

// A bandwidth-bound step of the ring on compute (what Transformer Engine's correction kernels do), priced by the
// bytes it moves: forward, folding block `step` into the fp32 output by log-sum-exp; backward, adding this rank's
// share of step - 1's key-value gradient into the one received, before it travels on.
OpIndex ring_elementwise(Emitter& e, int step, std::int64_t bytes) {
  Op op = Emitter::moved(OpKind::elementwise, OpRole::core_attention, bytes);
  op.ring_step = static_cast<std::int16_t>(step);
  op.context_form = ContextForm::ring;
  return e.emit(op);
}

// The forward merge of block `step`: the diagonal's bf16 output starts the fp32 one (2 + 4 bytes an element);
// a later block's rows are read with the running output's and written back (2 + 4 + 4), all the rank's rows for a
// block of an earlier rank, the second chunk's for a later one: the class's ranks merge 3/4 of their rows on
// average; the last merge also writes the bf16 output (4 + 2).
std::int64_t merge_bytes(const RankShapes& s, int step) {
  const std::int64_t elements = s.tokens * s.heads * s.d;
  std::int64_t bytes = step == 0 ? 6 * elements : 10 * elements * 3 / 4;
  if (step == s.cp - 1) bytes += 6 * elements;
  return bytes;
}

void core_attention(Emitter& e, bool backward) {
  const RankShapes& s = e.shapes();
  if (s.cp == 1) {
    e.emit(attention_op(e, backward, s.s, s.s, true));
    return;
  }
  if (s.cp_all_gather) {
    all_gathered_attention(e, backward);
    return;
  }
  const std::int64_t kv_bytes = s.b * s.s * 2 * s.groups * s.d * 2;  // this rank's K and V, bf16
  const OpIndex kv_ready = e.chain;
  const auto bytes = [&](int step) { return ring_payload(s.cp, step, backward).blocks() * kv_bytes; };
  if (!backward) {
    OpIndex previous_send = kNoOp;
    for (int step = 0; step < s.cp; ++step) {
      const OpIndex send = step < s.cp - 1 ? ring_exchange(e, step, bytes(step), step == 0 ? kv_ready : kNoOp) : kNoOp;
      const OpIndex block = ring_block(e, step, false);
      if (previous_send != kNoOp) e.depend(previous_send, block);
      ring_elementwise(e, step, merge_bytes(s, step));
      previous_send = send;
    }
    return;
  }
  // The gradient that exchange `step` carries: step - 1's block's share added to what arrived (from step 2 on;
  // at step 1 the owner's share alone), once the exchange before has brought it.
  const auto gradient_ready = [&](int step, OpIndex previous_send) {
    if (step < 2) return e.chain;
    const OpIndex add = ring_elementwise(e, step, 3 * kv_bytes);
    e.depend(previous_send, add);
    return add;
  };
  OpIndex previous_send = ring_exchange(e, 0, bytes(0), kv_ready);
  ring_block(e, 0, true);
  for (int step = 1; step < s.cp; ++step) {
    const OpIndex send = ring_exchange(e, step, bytes(step), gradient_ready(step, previous_send));
    const OpIndex block = ring_block(e, step, true);
    e.depend(previous_send, block);
    previous_send = send;
  }
  e.chain = ring_exchange(e, s.cp, bytes(s.cp), gradient_ready(s.cp, previous_send));
}

// The embedding's lookup (or its backward) over all tokens of the micro-batch; with hidden dropout (Megatron's
// embedding_dropout) the op says its probability: the dropout runs on the lookup's rows before the TP reduction,
// with a mask that is the same on every TP rank (a function of each element's place in the batch), which is the
// dropout of the reduced sum.
Op embedding_op(OpKind kind, const RankShapes& s) {
  Op op = Emitter::rows_cols(kind, OpRole::embedding, s.tokens, s.h);
  op.dropout = s.hidden_dropout;
  return op;
}

// Vocab-parallel embedding: every TP rank looks up its vocabulary shard for all tokens, then the
// partial rows are summed (all-reduce) or summed and scattered by sequence (SP).
void embedding_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.emit(embedding_op(OpKind::embedding_forward, s));
  if (tp_active(s))
    e.emit(s.sp ? tp_op(OpKind::reduce_scatter, OpRole::tp_scatter, s, activation_bytes(s), OpRole::embedding,
                        LinearTensor::output)
                : tp_op(OpKind::all_reduce, OpRole::tp_reduce, s, activation_bytes(s), OpRole::embedding,
                        LinearTensor::output));
}

void embedding_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  if (tp_active(s) && s.sp)
    e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), OpRole::embedding,
                 LinearTensor::output_gradient));
  e.emit(embedding_op(OpKind::embedding_backward, s));
}

// Vocab-parallel cross-entropy: the max and the sum of exponentials are all-reduced over TP
// (2 fp32 values per token). Unfused, the loss ops say so (Op::unfused_loss, set by the emitter): their kernels
// pass over an fp32 copy of the logits (core/unfused_loss.hpp).
void loss_forward(Emitter& e) {
  const RankShapes& s = e.shapes();
  e.emit(Emitter::rows_cols(OpKind::loss_forward, OpRole::loss, s.tokens, s.vocab));
  if (tp_active(s))
    e.loss_complete[e.micro_batch()] =
        e.emit(Emitter::collective(OpKind::all_reduce, OpRole::loss, Stream::tp_comm, GroupKind::tensor, s.tp,
                                   2 * s.tokens * 4));
}

void loss_backward(Emitter& e) {
  const RankShapes& s = e.shapes();
  if (auto loss = e.loss_complete.find(e.micro_batch()); loss != e.loss_complete.end()) e.pending_wait = loss->second;
  e.emit(Emitter::rows_cols(OpKind::loss_backward, OpRole::loss, s.tokens, s.vocab));
}

void block_ops(Emitter& e, const layer::Block& block, Phase phase);

// Selective recompute's modules outside attention and the experts (docs/SIMULATOR.md "Activation recompute"), each
// repeated where Megatron's backward first needs what it discarded: `layernorm`, a pre-norm's forward once the
// backward reaches its branch (the residual's backward; transformer_layer.py registers the recompute on the branch's
// output); `mlp`, a dense MLP's forward (its TP collectives included) before FC2's backward (CheckpointFunction).
void recompute_before_backward(Emitter& e, const layer::Block& block) {
  const RankShapes& s = e.shapes();
  if (s.recomputes(RecomputeModule::layernorm) && block.kind == layer::BlockKind::residual) {
    const OpRole norm = block.role == OpRole::attention_residual ? OpRole::input_norm : OpRole::mlp_norm;
    e.recompute([&] { block_ops(e, layer::block_of(norm), Phase::forward); });
  }
  if (s.recomputes(RecomputeModule::mlp) && block.role == OpRole::fc2)
    e.recompute([&] {
      for (OpRole role : {OpRole::fc1, OpRole::activation, OpRole::fc2})
        block_ops(e, layer::block_of(role), Phase::forward);
    });
}

void block_ops(Emitter& e, const layer::Block& block, Phase phase) {
  const RankShapes& s = e.shapes();
  const bool backward = phase == Phase::backward;
  const std::int64_t n_out = width_per_rank(s, block.out_width), k_in = width_per_rank(s, block.in_width);
  switch (block.kind) {
    case layer::BlockKind::norm: {
      const Op norm = e.rank_class().op(lowering::emit_norm(e, block, phase));
      emit_eager_passes(e, norm, eager_norm_bytes(norm.normalization).of(backward));
      return;
    }
    case layer::BlockKind::column_linear:
      backward ? column_parallel_backward(e, block.role, n_out, k_in) : column_parallel_forward(e, block.role, n_out, k_in);
      return;
    case layer::BlockKind::row_linear:
      if (backward) recompute_before_backward(e, block);
      backward ? row_parallel_backward(e, block.role, n_out, k_in) : row_parallel_forward(e, block.role, n_out, k_in);
      return;
    case layer::BlockKind::core_attention: {
      const Op rope = Emitter::rows_cols(backward ? OpKind::rope_backward : OpKind::rope_forward, OpRole::rope,
                                         s.tokens, (s.heads + s.groups) * s.d);
      // QK-norm: one norm over the rows of each head's query and key (head_dim wide), before RoPE.
      Op qk_norm = Emitter::rows_cols(backward ? OpKind::norm_backward : OpKind::norm_forward, OpRole::qk_norm,
                                      s.tokens * (s.heads + s.groups), s.d);
      const auto eager_qk_norm = [&] {
        const Op emitted = e.rank_class().op(e.emit(qk_norm));
        emit_eager_passes(e, emitted, eager_norm_bytes(emitted.normalization).of(backward));
      };
      if (s.qk_norm && !backward) eager_qk_norm();
      if (s.rope && !backward) emit_eager_passes(e, e.rank_class().op(e.emit(rope)), kEagerRopeBytes.forward);
      if (backward && s.recomputes(RecomputeModule::core_attn)) e.recompute([&] { core_attention(e, false); });
      core_attention(e, backward);
      if (s.rope && backward) e.emit(rope);
      if (s.qk_norm && backward) eager_qk_norm();
      if (s.rope && backward) emit_eager_passes(e, rope, kEagerRopeBytes.backward);
      return;
    }
    case layer::BlockKind::mla_attention: emit_mla_attention(e, backward, core_attention); return;
    case layer::BlockKind::activation: {
      const OpKind kind = backward ? OpKind::activation_backward : OpKind::activation_forward;
      const Op activation = e.rank_class().op(e.emit(Emitter::rows_cols(kind, block.role, s.tokens, s.ffn)));
      emit_eager_passes(e, activation, eager_activation_bytes(activation.activation).of(backward));
      return;
    }
    case layer::BlockKind::residual:
      lowering::emit_residual(e, block, phase);
      if (backward) recompute_before_backward(e, block);
      return;
    case layer::BlockKind::experts: emit_experts(e, backward); return;
    case layer::BlockKind::embedding: backward ? embedding_backward(e) : embedding_forward(e); return;
    case layer::BlockKind::loss: backward ? loss_backward(e) : loss_forward(e); return;
  }
}

// An MTP depth's entry (multi_token_prediction.py, _concat_embeddings, at NVIDIA/Megatron-LM d98e8a64dd): eh_proj
// reads the concatenation of the two norms' outputs (torch.cat: both read, 2h written); its output, split by columns
// over TP, is all-gathered whole (gather_from_tensor_model_parallel_region) and, under SP, cut to the rank's rows
// (scatter_to_sequence_parallel_region, no traffic). Backward the cut's gradient is all-gathered over the sequence
// (SP) and the gather's is a split; the concatenation's gradient is two views.
void mtp_entry_ops(Emitter& e, const layer::Block& block, Phase phase) {
  const RankShapes& s = e.shapes();
  const bool projection = block.role == OpRole::mtp_projection;
  if (projection && phase == Phase::forward)
    e.emit(Emitter::moved(OpKind::elementwise, OpRole::mtp_projection, 2 * s.tokens_local * 2 * s.h * 2));
  if (projection && phase == Phase::backward && tp_active(s) && s.sp)
    e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), OpRole::mtp_projection,
                 LinearTensor::output_gradient));
  block_ops(e, block, phase);
  if (projection && phase == Phase::forward && tp_active(s))
    e.emit(tp_op(OpKind::all_gather, OpRole::tp_gather, s, activation_bytes(s), OpRole::mtp_projection,
                 LinearTensor::output));
}

// A layer's ops depend on its blocks and the class's shapes, not on which layer it is: its passes repeat (Emitter::emit_pass).
void decoder_layer_forward(Emitter& e, const ModelConfig& model, int layer) {
  const std::span<const layer::Block> blocks =
      layer::layer_blocks(model.is_moe_layer(layer), model.mla.enabled(), model.post_norms);
  e.set_layer(layer);
  e.set_attention_window(model.is_windowed_layer(layer) ? model.window_size : 0);
  e.emit_pass(blocks.data(), false, [&] { emit_unit_forward(e, blocks, layer, block_ops); });
}

void decoder_layer_backward(Emitter& e, const ModelConfig& model, int layer) {
  const std::span<const layer::Block> blocks =
      layer::layer_blocks(model.is_moe_layer(layer), model.mla.enabled(), model.post_norms);
  e.set_layer(layer);
  e.set_attention_window(model.is_windowed_layer(layer) ? model.window_size : 0);
  e.emit_pass(blocks.data(), true, [&] {
    emit_unit_backward(e, blocks, layer, block_ops, e.shapes().recompute == Recompute::full);
  });
}

}  // namespace

// An MTP depth runs its entry, its transformer layer (the last decoder layer's kind) and its own head: its final
// norm, the shared output projection and its loss (issued, like the main head's, outside any layer: in bf16).
void emit_layer_forward(Emitter& e, const ModelConfig& model, int layer) {
  if (!model.is_mtp_layer(layer)) return decoder_layer_forward(e, model, layer);
  emit_unit_forward(e, layer::mtp_entry_blocks(), layer, mtp_entry_ops);
  decoder_layer_forward(e, model, layer);
  emit_unit_forward(e, layer::head_blocks(), -1, block_ops);
}

void emit_layer_backward(Emitter& e, const ModelConfig& model, int layer) {
  if (!model.is_mtp_layer(layer)) return decoder_layer_backward(e, model, layer);
  emit_unit_backward(e, layer::head_blocks(), -1, block_ops, false);
  decoder_layer_backward(e, model, layer);
  emit_unit_backward(e, layer::mtp_entry_blocks(), layer, mtp_entry_ops, false);
}

void emit_embedding_forward(Emitter& e) { emit_unit_forward(e, layer::embedding_blocks(), -1, block_ops); }
void emit_embedding_backward(Emitter& e) { emit_unit_backward(e, layer::embedding_blocks(), -1, block_ops, false); }
void emit_head_forward(Emitter& e) { emit_unit_forward(e, layer::head_blocks(), -1, block_ops); }
void emit_head_backward(Emitter& e) { emit_unit_backward(e, layer::head_blocks(), -1, block_ops, false); }

void emit_head_deferred_weight_gradient(Emitter& e, OpIndex gather_after) {
  e.set_layer(-1);
  for (const layer::Block& block : layer::head_blocks())
    if (block.kind == layer::BlockKind::column_linear)
      column_parallel_deferred_weight_gradient(e, block.role, width_per_rank(e.shapes(), block.out_width),
                                               width_per_rank(e.shapes(), block.in_width), gather_after);
}

}  // namespace twin::lowering
