// The emitter: appends ops to a rank class with the pass's context filled in, wires each to the op whose
// output it consumes, and builds the op kinds the lowering uses.
#include "strategies/lowering_emitter.hpp"

#include "core/attention_flops.hpp"

namespace twin::lowering {

std::int64_t width_per_rank(const RankShapes& s, layer::Width width) {
  const std::int64_t v = s.mla() ? s.v_d : s.d;  // a value head's width
  switch (width) {
    case layer::Width::hidden: return s.h;
    case layer::Width::query_and_key: return (s.heads + s.groups) * s.d;
    case layer::Width::value: return s.groups * v;
    case layer::Width::query: return s.heads * v;
    case layer::Width::qkv: return s.qkv_width;
    case layer::Width::fc1: return s.fc1_width;
    case layer::Width::ffn: return s.ffn;
    case layer::Width::attention_scores: return s.heads * s.s;
    case layer::Width::heads: return s.heads;
    case layer::Width::experts: return s.experts_total;
    case layer::Width::expert_fc1: return s.moe_fc1_width;
    case layer::Width::expert_ffn: return s.moe_ffn;
    case layer::Width::vocab: return s.vocab;
    case layer::Width::shared_fc1: return s.shared_fc1_width;
    case layer::Width::shared_ffn: return s.shared_ffn;
    case layer::Width::q_latent: return s.q_lora_rank;
    case layer::Width::kv_latent: return s.kv_lora_rank;
    case layer::Width::two_hidden: return 2 * s.h;
    case layer::Width::hidden_columns: return s.h / s.tp;
  }
  return 0;
}

OpIndex emit_norm(Emitter& e, const layer::Block& norm, Phase phase) {
  const RankShapes& s = e.shapes();
  const bool backward = phase == Phase::backward;
  Op op = Emitter::rows_cols(backward ? OpKind::norm_backward : OpKind::norm_forward, norm.role, s.tokens_local, s.h);
  op.fuses_residual = backward && s.residual_fusion && layer::beside_skip_path(norm);
  op.normalization = s.normalization;
  return e.emit(op);
}

// Bytes per element of a residual add: two bf16 tensors read and one written; with hidden dropout (Megatron's
// bias-dropout-add) the forward also writes the 1-byte mask, and the backward, after the add, reads the output's
// gradient and the mask and writes the branch's gradient (dy * mask / (1 - p)).
namespace {
std::int64_t residual_bytes_per_element(Phase phase, bool dropout) {
  if (!dropout) return 3 * 2;
  return phase == Phase::backward ? 3 * 2 + (2 + 1 + 2) : 3 * 2 + 1;
}
}  // namespace

// The residual add over this rank's rows of the residual stream (tokens_local x h), stated as rows and columns
// (the executor checks them against its buffers) and the bytes it moves; with hidden dropout the op says its
// probability.
void emit_residual(Emitter& e, const layer::Block& residual, Phase phase) {
  const RankShapes& s = e.shapes();
  if (phase == Phase::backward && s.residual_fusion) return;
  if (phase == Phase::forward && e.chain != kNoOp && e.rank_class().op(e.chain).fuses_residual) return;
  Op op = Emitter::rows_cols(OpKind::elementwise, residual.role, s.tokens_local, s.h);
  op.dropout = s.hidden_dropout;
  op.bytes = residual_bytes_per_element(phase, s.hidden_dropout > 0) * s.tokens_local * s.h;
  e.emit(op);
}

void emit_unit_forward(Emitter& e, std::span<const layer::Block> blocks, int layer, BlockOps ops) {
  e.set_layer(layer);
  for (const layer::Block& block : blocks) ops(e, block, Phase::forward);
}

void emit_unit_backward(Emitter& e, std::span<const layer::Block> blocks, int layer, BlockOps ops,
                        bool recompute_forward) {
  if (recompute_forward) {
    const RankShapes& s = e.shapes();
    const std::size_t again =
        s.checkpoint_early_stop ? layer::blocks_recomputed_by_early_stop(blocks, s.hidden_dropout > 0) : blocks.size();
    e.recompute([&] { emit_unit_forward(e, blocks.first(again), layer, ops); });  // collectives included
  }
  e.set_layer(layer);
  for (auto block = blocks.rbegin(); block != blocks.rend(); ++block) ops(e, *block, Phase::backward);
}

void Emitter::fill(Op& op) const {
  op.phase = phase_;
  op.micro_batch = micro_batch_;
  op.chunk = static_cast<std::int16_t>(chunk_);
  op.layer = layer_;
  op.recomputed = recomputed_;
  // How the kernels price these ops depends on the model, not the call site.
  op.attention.flash = sh_.flash;
  const bool attention = op.kind == OpKind::attention_forward || op.kind == OpKind::attention_backward;
  op.attention.dropout = sh_.attention_dropout && attention;
  if (attention) op.dropout = sh_.attention_dropout_probability;
  op.attention.cudnn = sh_.cudnn_attention && attention;
  op.attention.softcapped = sh_.attention_softcap > 0 && attention;
  op.attention.sinks = sh_.attention_sinks && attention;
  op.activation = sh_.activation;
  const bool loss = op.kind == OpKind::loss_forward || op.kind == OpKind::loss_backward;
  op.softcapped_logits = sh_.softcapped_logits && loss;
  op.unfused_loss = !sh_.cross_entropy_loss_fusion && loss;
  if (op.kind == OpKind::gemm && op.gemm_pass == GemmPass::weight_gradient) op.gemm_output = weight_gradient_output();
}

GemmOutput Emitter::weight_gradient_output() const {
  // The fusion into a buffer kept over the step's micro-batches: ZeRO 0 and 1 (ZeRO 2 and 3 reduce every micro-batch's
  // gradients from a fresh buffer; PyTorch FSDP's autograd writes each micro-batch's gradients itself).
  const bool kept = sh_.gradient_accumulation_fusion && !sh_.reduces_every_micro_batch && !sh_.pytorch_fsdp;
  const bool fp32 = sh_.main_grad_bytes == 4;
  if (!kept) return GemmOutput::written;
  // A rank's micro-batches run their backward in index order under every schedule, the first storing (as twin
  // execute's first writer of each weight's gradient does; Megatron adds even the first into a zeroed main_grad).
  if (micro_batch_ == first_weight_gradient_micro_batch) return fp32 ? GemmOutput::written_fp32 : GemmOutput::written;
  return fp32 ? GemmOutput::added_fp32 : GemmOutput::added;
}

void Emitter::depend(OpIndex first, OpIndex then) {
  if (first == kNoOp || then == kNoOp) return;
  if (rc_.op(first).stream != rc_.op(then).stream) rc_.add_dependency(first, then);
}

OpIndex Emitter::emit(Op op) {
  fill(op);
  const OpIndex index = rc_.add(op);
  depend(chain, index);
  depend(pending_wait, index);
  pending_wait = kNoOp;
  chain = index;
  return index;
}

OpIndex Emitter::emit_after(Op op, OpIndex after) {
  fill(op);
  const OpIndex index = rc_.add(op);
  depend(after, index);
  return index;
}

Op Emitter::gemm(OpRole role, GemmPass pass, std::int64_t m, std::int64_t n, std::int64_t k, int count) {
  Op op;
  op.kind = OpKind::gemm;
  op.role = role;
  op.gemm_pass = pass;
  op.gemm = {m, n, k, count, false, false};
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * count;
  return op;
}

Op Emitter::rows_cols(OpKind kind, OpRole role, std::int64_t rows, std::int64_t cols) {
  Op op;
  op.kind = kind;
  op.role = role;
  op.rows = rows;
  op.cols = cols;
  return op;
}

Op Emitter::moved(OpKind kind, OpRole role, std::int64_t bytes) {
  Op op;
  op.kind = kind;
  op.role = role;
  op.bytes = bytes;
  return op;
}

Op Emitter::attention(const RankShapes& s, std::int64_t window, bool backward, std::int64_t seq_q, std::int64_t seq_kv,
                      bool causal, ContextForm form) {
  Op op;
  op.context_form = form;
  op.kind = backward ? OpKind::attention_backward : OpKind::attention_forward;
  op.role = OpRole::core_attention;
  op.attention = {s.b, s.heads, s.groups, seq_q, seq_kv, s.d, causal};
  if (s.mla()) op.attention.v_head_dim = static_cast<std::int16_t>(s.v_d);
  if (causal && window < seq_kv) op.attention.window = static_cast<std::int32_t>(window);  // < kMaxSequence
  op.flops = attention_flops(op.attention, backward);
  return op;
}

Op Emitter::collective(OpKind kind, OpRole role, Stream stream, GroupKind group, int group_size, std::int64_t bytes) {
  Op op;
  op.kind = kind;
  op.role = role;
  op.stream = stream;
  op.group = group;
  op.group_size = group_size;
  op.bytes = bytes;
  return op;
}

Op Emitter::optimizer_step(std::int64_t elements, const OptimizerPrecision& precision, int main_gradient_bytes) {
  Op op;
  op.kind = OpKind::optimizer_step;
  op.role = OpRole::optimizer;
  op.elements = elements;
  op.optimizer_precision = precision;
  op.main_gradient_bytes = static_cast<std::int8_t>(main_gradient_bytes);
  return op;
}

Op Emitter::serving(Op op, OpRole linear, LinearTensor tensor) {
  op.linear = linear;
  op.linear_tensor = tensor;
  return op;
}

}  // namespace twin::lowering
