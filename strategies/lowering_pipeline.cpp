// Lowering of a whole iteration: one rank class per pipeline stage, its passes in schedule order with
// pipeline send/recv at virtual-stage boundaries, then the optimizer phase. The data-parallel side (gradient
// reduction per layer as its last micro-batch's backward ends, ZeRO-3 weight gathers one layer ahead) is in
// lowering_data_parallel.cpp, the double-strand passes in lowering_double_strand.cpp, the entry points (a whole
// graph, or class by class) in lowering_graphs.cpp.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "strategies/deepspeed_zero3.hpp"
#include "strategies/pytorch_fsdp2.hpp"
#include "strategies/lowering_stage.hpp"
#include "strategies/fp8_linears.hpp"
#include "strategies/rank_layout.hpp"

namespace twin {
namespace lowering {

void emit_unit(Emitter& e, const ModelConfig& model, const Unit& u, bool forward) {
  switch (u.kind) {
    case Unit::embedding_unit:
      forward ? emit_embedding_forward(e) : emit_embedding_backward(e);
      break;
    case Unit::head_unit:
      forward ? emit_head_forward(e) : emit_head_backward(e);
      break;
    case Unit::layer_unit:
      forward ? emit_layer_forward(e, model, u.layer) : emit_layer_backward(e, model, u.layer);
      break;
  }
}

StageLowering::StageLowering(const Scenario& scenario, const Strategy& strategy, const RankShapes& shapes,
                             RankClass& rc, const Profile* profile)
    : model_(scenario.model), scenario_(scenario), strategy_(strategy), s_(shapes), profile_(profile),
      e_(rc, shapes) {}

void StageLowering::begin_stage(int stage) {
  stage_ = stage;
  const int chunks = chunks_per_stage(strategy_);
  last_virtual_stage_ = s_.pp * chunks - 1;
  holds_embedding_ = holds_head_ = false;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    holds_embedding_ |= virtual_stage(chunk) == 0;
    holds_head_ |= virtual_stage(chunk) == last_virtual_stage_;
  }
  // The first micro-batches' backward passes defer (Megatron's buffer grows until the limit).
  deferred_head_passes_ =
      holds_head_ ? deferred_output_wgrad_micro_batches(scenario_.framework, s_.pp, strategy_.num_micro_batches) : 0;
  deferred_output_wgrads_.clear();
  head_reduction_after_drain_ = false;
}

void StageLowering::run(int stage, const std::vector<ScheduleStep>& order) {
  begin_stage(stage);
  gather_updated_weights_ahead(order);
  std::vector<int> last_backward(static_cast<std::size_t>(s_.vpp), -1);
  for (int i = 0; i < static_cast<int>(order.size()); ++i)
    if (!order[i].forward) last_backward[order[i].chunk] = i;
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const ScheduleStep& step = order[i];
    if (step.beside_next) {  // the combined 1F1B's pair: this forward beside the next step's backward
      if (i + 1 == static_cast<int>(order.size()) || order[i + 1].forward ||
          order[i + 1].micro_batch == step.micro_batch)
        throw std::logic_error("combined 1F1B: a paired forward not followed by another micro-batch's backward");
      combined_pass(step, order[i + 1], last_backward[order[i + 1].chunk] == i + 1);
      ++i;
    } else if (step.forward)
      forward_pass(step);
    else
      backward_pass(step, last_backward[step.chunk] == i);
  }
  drain_deferred_output_weight_gradients();
  optimizer_phase();
  if (s_.pytorch_fsdp) assign_pytorch_dispatch(e_.rank_class(), s_);
}

std::vector<Unit> StageLowering::units(int chunk) const {
  std::vector<Unit> list;
  const int vs = virtual_stage(chunk);
  if (vs == 0) list.push_back({Unit::embedding_unit});
  for (int l : chunk_layers(model_, strategy_, stage_, chunk)) list.push_back({Unit::layer_unit, l});
  if (vs == last_virtual_stage_) list.push_back({Unit::head_unit});
  return list;
}

RankParameters StageLowering::unit_parameters(const Unit& u) const {
  switch (u.kind) {
    case Unit::embedding_unit: return {embedding_parameters_per_rank(model_, s_.tp), 0};
    case Unit::head_unit: return {output_parameters_per_rank(model_, s_.tp, holds_embedding_), 0};
    case Unit::layer_unit: break;
  }
  return layer_parameters_per_rank(model_, u.layer, s_.tp, s_.ep, s_.etp);
}

// `tensors`: a double-strand transfer carries one strand's activation and the other's gradient. `tp_share`: this TP
// rank's 1/tp of the tensor only (Megatron-LM's scatter/gather, framework.scatter_gather_tensors_in_pipeline).
Op StageLowering::p2p(OpKind kind, OpRole role, int peer_stage, std::int64_t tag, int tensors, bool tp_share) const {
  const std::int64_t bytes = tensors * s_.tokens_local * s_.h * 2;
  Op op = Emitter::collective(kind, role, kind == OpKind::send ? Stream::pp_send : Stream::pp_recv,
                              GroupKind::pipeline, s_.pp, tp_share ? bytes / s_.tp : bytes);
  op.peer = peer_stage;
  op.p2p_tag = tag;
  op.transfer = role == OpRole::pipeline_activation ? Transfer::activation : Transfer::gradient;
  return op;
}

// A pass's receive depends on nothing but the receives before it on its stream: it is posted ahead, and its transfer
// runs as soon as the peer's send is ready, beside whatever this stage computes meanwhile (Megatron-Core's interleaved
// schedule posts the next forward's receive while the current pass runs, overlap_p2p_comm). The pass's compute waits
// for it, and for the amax reduction of the pass before through the compute stream's order (reduce_fp8_amaxes). Until
// 2026-12-07 the receive waited for that reduction too, so that under delayed FP8 scaling every hop's transfer was
// exposed after the previous pass's compute.
// Megatron-LM's p2p_communication._communicate of 2021-22 (NVIDIA/Megatron-LM f938e19a58, 7fccd6a17a): with
// scatter_gather_tensors_in_pipeline and no SP, it sends split_tensor_into_1d_equal_chunks' share and, after the
// exchange, gather_split_1d_tensor all-gathers the shares over the TP group, which the stage's compute then reads.
void StageLowering::receive(OpRole role, int peer_stage, std::int64_t tag) {
  e_.emit(p2p(OpKind::recv, role, peer_stage, tag, 1, s_.scatter_gather_p2p));
  if (s_.scatter_gather_p2p)
    e_.emit(Emitter::collective(OpKind::all_gather, role, Stream::tp_comm, GroupKind::tensor, s_.tp,
                                s_.tokens_local * s_.h * 2));
}

void StageLowering::forward_pass(const ScheduleStep& step) {
  const int vs = virtual_stage(step.chunk);
  e_.begin_pass(Phase::forward, step.micro_batch, step.chunk);
  e_.chain = kNoOp;  // the receive is posted as early as its stream allows (see receive)
  if (vs > 0) receive(OpRole::pipeline_activation, (vs - 1) % s_.pp, p2p_tag(step.micro_batch, vs - 1, false));
  run_units(units(step.chunk), true, false);
  e_.set_layer(-1);
  reduce_fp8_amaxes(step.chunk, true);
  if (vs < last_virtual_stage_)
    e_.emit(p2p(OpKind::send, OpRole::pipeline_activation, (vs + 1) % s_.pp, p2p_tag(step.micro_batch, vs, false), 1,
                s_.scatter_gather_p2p));
}

void StageLowering::backward_pass(const ScheduleStep& step, bool last_of_chunk) {
  const int vs = virtual_stage(step.chunk);
  e_.begin_pass(Phase::backward, step.micro_batch, step.chunk);
  e_.chain = kNoOp;
  if (vs < last_virtual_stage_)
    receive(OpRole::pipeline_gradient, (vs + 1) % s_.pp, p2p_tag(step.micro_batch, vs, true));
  std::vector<Unit> list = units(step.chunk);
  std::reverse(list.begin(), list.end());
  run_units(list, false, last_of_chunk || s_.reduces_every_micro_batch);
  e_.set_layer(-1);
  // ZeRO-2/3 without overlap_grad_reduce: the pass's reductions after the pass, not the whole backward's at its end.
  if (s_.reduces_every_micro_batch) emit_deferred_reductions();
  reduce_fp8_amaxes(step.chunk, false);
  if (vs > 0)
    e_.emit(p2p(OpKind::send, OpRole::pipeline_gradient, (vs - 1) % s_.pp, p2p_tag(step.micro_batch, vs - 1, true), 1,
                s_.scatter_gather_p2p));
}

OpIndex StageLowering::last_on(Stream stream) { return e_.rank_class().last_on(stream); }

void StageLowering::emit_stage_unit(const Unit& u, bool forward) {
  const bool head = u.kind == Unit::head_unit;
  const bool defers =
      head && !forward && static_cast<int>(deferred_output_wgrads_.size()) < deferred_head_passes_;
  e_.defers_weight_gradient = defers;
  e_.first_weight_gradient_micro_batch = head ? first_head_weight_gradient() : 0;
  emit_unit(e_, model_, u, forward);
  e_.defers_weight_gradient = false;
  e_.first_weight_gradient_micro_batch = 0;
  if (defers) deferred_output_wgrads_.push_back({e_.micro_batch(), e_.chunk(), false});
}

void StageLowering::reduce_unit_gradients(const Unit& u, OpIndex after) {
  if (u.kind != Unit::head_unit || deferred_output_wgrads_.empty()) return reduce_gradients(u, after);
  DeferredWeightGradient& last = deferred_output_wgrads_.back();
  const bool deferred_now = last.micro_batch == e_.micro_batch() && last.chunk == e_.chunk();
  if (!s_.reduces_every_micro_batch)
    head_reduction_after_drain_ = true;
  else if (deferred_now)
    last.reduces = true;
  else
    reduce_gradients(u, after);  // a micro-batch not deferred, reducing its own gradient at once
}

void StageLowering::drain_deferred_output_weight_gradients() {
  if (deferred_output_wgrads_.empty()) return;
  const OpIndex start = last_on(Stream::compute);
  e_.chain = start;
  std::vector<OpIndex> wgrads;
  for (const DeferredWeightGradient& deferred : deferred_output_wgrads_) {
    e_.begin_pass(Phase::backward, deferred.micro_batch, deferred.chunk);
    e_.first_weight_gradient_micro_batch = first_head_weight_gradient();
    // Two gather buffers: a gather waits for the GEMM that read its buffer last, two before it.
    emit_head_deferred_weight_gradient(e_, wgrads.size() >= 2 ? wgrads[wgrads.size() - 2] : start);
    wgrads.push_back(e_.chain);
    if (deferred.reduces) reduce_gradients({Unit::head_unit}, e_.chain);
  }
  e_.first_weight_gradient_micro_batch = 0;
  if (head_reduction_after_drain_) reduce_gradients({Unit::head_unit}, e_.chain);
  deferred_output_wgrads_.clear();
  head_reduction_after_drain_ = false;
}

// The reductions overlap_grad_reduce off left for later, last unit first as the backward produced them, each after
// the last compute op so far (under double strand the second compute stream's too).
void StageLowering::emit_deferred_reductions() {
  const OpIndex last_compute = last_on(Stream::compute);
  const OpIndex last_compute2 = last_on(Stream::compute2);
  for (const Unit& u : deferred_reductions_) {
    const OpIndex before = last_on(Stream::dp_comm);
    emit_gradient_reduction(u, last_compute);
    if (const OpIndex reduction = last_on(Stream::dp_comm); reduction != before) e_.depend(last_compute2, reduction);
  }
  deferred_reductions_.clear();
}

// Megatron wraps a model chunk's forward in one fp8_autocast under delayed scaling (TransformerBlock.forward's outer
// quantization context, megatron/core/transformer/transformer_block.py at NVIDIA/Megatron-LM d98e8a64dd), whose exit
// reduces the forward amaxes; the backward's are reduced when the first FP8 module's backward, the last to run,
// ends (_Linear.backward, reduce_and_update_fp8_tensors(forward=False), transformer_engine/pytorch/module/linear.py
// at NVIDIA/TransformerEngine d0067d0da6). Both are a blocking torch.distributed.all_reduce (MAX) followed by the
// fused amax-and-scale update (quantization.py reduce_and_update_fp8_tensors). The all-reduce runs on the compute
// stream: the caller's stream waits for it (async_op=False), and it queues behind nothing but the amax group's own
// reductions, since the gradient reductions and parameter gathers run on other communicators and streams; on the
// data-parallel stream (before 2026-12-06) it waited behind them.
void StageLowering::reduce_fp8_amaxes(int chunk, bool forward) {
  const std::int64_t bytes = fp8_amax_reduction_bytes(scenario_, strategy_, stage_, chunk, forward);
  if (bytes == 0) return;
  e_.emit(Emitter::collective(OpKind::all_reduce, OpRole::fp8_amax, Stream::compute, GroupKind::amax,
                              s_.tp * s_.data_group, bytes));
}

// FSDP2 frees a block's gathered weights after its forward unless reshard_after_forward is off; torchtitan keeps
// the last block's (its backward comes at once), and FSDP2 the root module's: the embedding and the output layer.
// FSDP1 (FULL_SHARD) frees every block's and keeps the root's (_post_forward_reshard skips the root).
bool StageLowering::fsdp_reshards(const Unit& u) const {
  const bool kept_last = !s_.flat_parameters && u.layer == model_.num_layers - 1;
  return s_.reshard_after_forward && u.kind == Unit::layer_unit && !kept_last;
}

// Tied embeddings held by two stages: they sum their copies' gradients; then the gradient norm, the
// optimizer step on this rank's shard, and (ZeRO-1/2) the updated weights gathered. Under double strand
// the backward strand's last op (second compute stream) must have finished too.
void StageLowering::optimizer_phase() {
  const OpIndex last_compute = last_on(Stream::compute);
  const OpIndex last_compute2 = last_on(Stream::compute2);
  // overlap_grad_reduce off: every bucket is reduced once the backward has finished (Megatron's
  // finish_grad_sync without overlap), last layer first as the backward produced them; still backward work.
  e_.begin_pass(Phase::backward, -1, 0);
  if (s_.deepspeed_bf16_optimizer && !deferred_reductions_.empty()) {
    if (const OpIndex reduction = reduce_bf16_optimizer_gradients(last_compute); reduction != kNoOp)
      e_.depend(last_compute2, reduction);
    deferred_reductions_.clear();
  }
  emit_deferred_reductions();
  e_.begin_pass(Phase::optimizer, -1, 0);
  const OpIndex tp_sum = synchronise_gradients(last_compute, last_compute2);
  const RankParameters p = stage_parameters_per_rank(model_, strategy_, stage_);
  const auto shard = [&](std::int64_t n, int group) {
    return s_.zero_stage >= 1 ? (n + group - 1) / group : n;
  };
  const Op step = Emitter::optimizer_step(shard(p.dense, s_.data_group) + shard(p.expert, s_.expert_data_group),
                                          scenario_.training.optimizer_precision, s_.main_grad_bytes);
  const OpIndex gradients_ready = last_on(Stream::dp_comm);
  e_.chain = last_compute;
  if (s_.deepspeed_bf16_optimizer) {  // get_global_norm_of_tensors reads the whole fp32 buffer, not the rank's shard
    e_.pending_wait = gradients_ready;
    e_.emit(Emitter::moved(OpKind::elementwise, OpRole::optimizer, p.dense * 4));
  }
  const OpIndex update = e_.emit(step);
  e_.depend(gradients_ready, update);
  e_.depend(tp_sum, update);
  e_.depend(last_compute2, update);
  cast_weights_to_fp8(shard(fp8_weights_per_rank(scenario_, strategy_, stage_).dense, s_.data_group) +
                      shard(fp8_weights_per_rank(scenario_, strategy_, stage_).expert, s_.expert_data_group));
  gather_updated_weights(update, p.dense, p.expert);
}

OpIndex StageLowering::synchronise_gradients(OpIndex last_compute, OpIndex last_compute2) {
  // Tied, or with MTP (its lookups beside the loss), the last stage holds a copy of the embedding's table.
  const bool tied_pair = (!model_.untie_embeddings_and_output_weights || model_.mtp_num_layers > 0) &&
                         holds_embedding_ != holds_head_;
  // The main gradient in its dtype: Megatron all-reduces the table's main_grad, DeepSpeed's BF16_Optimizer the fp32
  // gradient (weight._hp_grad, pipe/engine.py).
  if (tied_pair) {
    const OpIndex sync = e_.emit_after(
        parameter_collective(OpKind::all_reduce, OpRole::embedding_grad_sync, GroupKind::embedding, 2,
                             padded_vocab_size(model_, s_.tp) / s_.tp * s_.h * s_.main_grad_bytes,
                             holds_embedding_ ? kEmbeddingUnit : kHeadUnit),
        last_compute);
    e_.depend(last_compute2, sync);
  }
  const OpIndex tp_sum = sum_duplicated_gradients(last_compute);
  e_.depend(last_compute2, tp_sum);
  if (s_.data_group > 1) {
    const OpIndex norm = e_.emit_after(Emitter::collective(OpKind::all_reduce, OpRole::grad_norm, Stream::dp_comm,
                                                           GroupKind::data, s_.data_group, 8),
                                       last_compute);
    e_.depend(last_compute2, norm);
    e_.depend(tp_sum, norm);
  }
  return tp_sum;
}

void StageLowering::gather_updated_weights(OpIndex update, std::int64_t dense, std::int64_t expert) {
  if ((s_.zero_stage == 1 || s_.zero_stage == 2) && !gathers_updated_weights_ahead()) {
    if (s_.data_group > 1 && dense > 0)
      e_.emit_after(parameter_collective(OpKind::all_gather, OpRole::param_gather, GroupKind::data, s_.data_group,
                                         dense * 2, kWholeStage), update);
    if (s_.expert_data_group > 1 && expert > 0)
      e_.emit_after(parameter_collective(OpKind::all_gather, OpRole::param_gather, GroupKind::expert_data,
                                         s_.expert_data_group, expert * 2, kWholeStage), update);
  }
}

// Megatron marks a duplicated linear's weight sequence_parallel (TELinear.__init__, megatron/core/extensions/
// transformer_engine.py at NVIDIA/Megatron-LM d98e8a64dd) and finalize_model_grads sums such gradients over TP after
// the data-parallel reduction (finish_grad_sync, then _allreduce_non_tensor_model_parallel_grads: one coalesced
// all-reduce, of their main gradients). Without SP each rank ran them on all rows: nothing to sum. The layer norms' weights join that
// all-reduce in Megatron too; twin prices it for MLA's duplicated weights only (docs/SIMULATOR.md).
OpIndex StageLowering::sum_duplicated_gradients(OpIndex after) {
  if (!s_.sp) return kNoOp;
  std::int64_t parameters = 0;
  for (int chunk = 0; chunk < chunks_per_stage(strategy_); ++chunk)
    for (int layer : chunk_layers(model_, strategy_, stage_, chunk))
      parameters += layer_parameter_groups(model_, layer).duplicated_linears;
  if (parameters == 0) return kNoOp;
  const OpIndex sum = e_.emit_after(Emitter::collective(OpKind::all_reduce, OpRole::tp_reduce, Stream::tp_comm,
                                                        GroupKind::tensor, s_.tp, parameters * s_.main_grad_bytes),
                                    after);
  e_.depend(last_on(Stream::dp_comm), sum);
  return sum;
}

// The FP8 copies of the stage's FP8 weights, made once per step after the update (Transformer Engine casts them
// at a step's first micro-batch and keeps them through the others; the time is the same). Under param_gather
// the optimizer casts its shard of `shard_elements` from the fp32 main weights, and the columnwise copies of the
// gathered weights follow; else the bf16 weights are cast, both copies at once.
void StageLowering::cast_weights_to_fp8(std::int64_t shard_elements) {
  if (!s_.fp8) return;
  const std::int64_t elements = fp8_weights_per_rank(scenario_, strategy_, stage_).total();
  if (elements == 0) return;
  const auto cast = [&](std::int64_t n, bool columnwise, double source_bytes) {
    Op op = Emitter::rows_cols(OpKind::fp8_cast, OpRole::optimizer, n, 1);
    op.linear_tensor = LinearTensor::weight;
    op.fp8_columnwise = columnwise;
    op.fp8_recipe = s_.fp8->recipe;
    op.bytes = fp8_cast_bytes(op.fp8_recipe, n, columnwise, source_bytes);
    e_.emit(op);
  };
  if (!s_.fp8->param_gather) {
    cast(elements, true, 2);
    return;
  }
  cast(shard_elements, false, 4);
  cast(elements, false, 1);  // the columnwise copies, from the gathered rowwise ones
}

}  // namespace lowering

}  // namespace twin
