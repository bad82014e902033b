// The data-parallel side of a stage's lowering: ZeRO-3's weight gathers (one unit ahead, DeepSpeed's stage 3 as it
// drives them: strategies/deepspeed_zero3.hpp; FSDP2's), the gradient reductions per unit, ZeRO 1/2's gathers of the
// updated weights ahead of their first forward, and the loop that runs a pass's units after their gathers.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "strategies/deepspeed_zero3.hpp"
#include "strategies/lowering_stage.hpp"
#include "strategies/pytorch_fsdp2.hpp"
#include "strategies/rank_layout.hpp"

namespace twin {
namespace lowering {

Op parameter_collective(OpKind kind, OpRole role, GroupKind group, int group_size, std::int64_t bytes,
                        std::int32_t unit) {
  Op op = Emitter::collective(kind, role, Stream::dp_comm, group, group_size, bytes);
  op.parameter_unit = unit;
  return op;
}

namespace {

std::int32_t parameter_unit(const Unit& u) {
  switch (u.kind) {
    case Unit::embedding_unit: return kEmbeddingUnit;
    case Unit::head_unit: return kHeadUnit;
    case Unit::layer_unit: break;
  }
  return u.layer;
}

// A memory pass of DeepSpeed's around a collective of `unit` (strategies/deepspeed_zero3.hpp), on the
// data-parallel stream.
Op deepspeed_copy(OpRole role, std::int64_t bytes, std::int32_t unit) {
  Op op = Emitter::moved(OpKind::elementwise, role, bytes);
  op.stream = Stream::dp_comm;
  op.parameter_unit = unit;
  return op;
}

}  // namespace

// A parameter all-gather after `after`; DeepSpeed's memory passes around it follow it. Returns the last op.
OpIndex StageLowering::emit_param_gather(const Op& gather, OpIndex after) {
  const OpIndex gathered = e_.emit_after(gather, after);
  if (!s_.deepspeed_zero3) return gathered;
  const std::int64_t elements = gather.bytes / 2;
  return e_.emit_after(deepspeed_copy(OpRole::param_gather, elements * kDeepSpeedGatherCopyBytesPerElement,
                                      gather.parameter_unit),
                       gathered);
}

// ZeRO-3: all-gather a unit's weights over its data-parallel groups; returns the last gather or kNoOp. DeepSpeed
// under full recompute gathers a layer's weights for its recomputed forward, then again those it released before
// their backward; what its hooks fetch on demand is left to the unit's start (on_demand_elements).
OpIndex StageLowering::gather_weights(const Unit& u, OpIndex after, bool forward) {
  if (s_.zero_stage < 3) return kNoOp;
  if (!forward && s_.pytorch_fsdp && !fsdp_reshards(u)) return kNoOp;  // still gathered from its forward
  const std::int64_t on_demand = on_demand_elements(u, forward);
  const std::int64_t dense = unit_parameters(u).dense;
  // DeepSpeed's host loops for the pass's prefetched weights go with its first prefetching gather.
  const TimeNs host_ns = gather_host_ns(u, forward, false);
  const std::int64_t first = std::max<std::int64_t>(dense - on_demand, 0);
  const OpIndex gathered = emit_weight_gather(u, after, first, host_ns);
  if (forward || !s_.deepspeed_zero3 || s_.recompute != Recompute::full || u.kind != Unit::layer_unit ||
      s_.data_group == 1)
    return gathered;
  const std::int64_t again = deepspeed_regathered_elements(s_, model_.is_moe_layer(u.layer)) -
                             std::max<std::int64_t>(on_demand - dense, 0);
  if (again <= 0) return gathered;
  Op regather = parameter_collective(OpKind::all_gather, OpRole::param_gather, GroupKind::data, s_.data_group,
                                     again * 2, parameter_unit(u));
  if (first == 0) regather.host_ns = host_ns;
  return emit_param_gather(regather, gathered == kNoOp ? after : gathered);
}

TimeNs StageLowering::gather_host_ns(const Unit& u, bool forward, bool on_demand) const {
  if (!s_.deepspeed_zero3 || s_.data_group == 1) return 0;
  int weights = 0;
  switch (u.kind) {
    case Unit::embedding_unit: weights = on_demand ? 0 : model_.position_embedding_rope ? 1 : 2; break;
    case Unit::head_unit: weights = on_demand ? 0 : 1; break;
    case Unit::layer_unit: {
      const DeepSpeedLayerGathers gathers =
          deepspeed_layer_gathers(s_, model_.is_moe_layer(u.layer), !forward, s_.recompute == Recompute::full);
      weights = on_demand ? gathers.on_demand_weights : gathers.prefetched_weights;
      break;
    }
  }
  return deepspeed_gather_host_ns(weights, s_.data_group);
}

std::int64_t StageLowering::on_demand_elements(const Unit& u, bool forward) const {
  if (!s_.deepspeed_zero3 || u.kind != Unit::layer_unit || s_.data_group == 1) return 0;
  return deepspeed_layer_gathers(s_, model_.is_moe_layer(u.layer), !forward, s_.recompute == Recompute::full)
      .on_demand_elements;
}

// The all-gathers of a unit's dense and expert weights over their data-parallel groups, after `after`; the
// last one, or kNoOp.
OpIndex StageLowering::emit_weight_gather(const Unit& u, OpIndex after, std::int64_t dense_elements, TimeNs host_ns) {
  const RankParameters p = unit_parameters(u);
  const std::int64_t dense = dense_elements < 0 ? p.dense : dense_elements;
  OpIndex last = kNoOp;
  if (s_.pytorch_fsdp && s_.zero_stage == 3 && dense > 0)  // all_gather_copy_in, even over one GPU
    after = last = e_.emit_after(fsdp_copy(OpRole::param_gather, Stream::dp_comm,
                                            fsdp2_copy_in_bytes(dense, s_.data_group), parameter_unit(u)), after);
  if (s_.data_group > 1 && dense > 0) {
    Op gather = parameter_collective(OpKind::all_gather, OpRole::param_gather, GroupKind::data, s_.data_group,
                                     dense * 2, parameter_unit(u));
    gather.host_ns = host_ns;
    last = emit_param_gather(gather, after);
  }
  if (s_.expert_data_group > 1 && p.expert > 0)
    last = e_.emit_after(parameter_collective(OpKind::all_gather, OpRole::param_gather, GroupKind::expert_data,
                                              s_.expert_data_group, p.expert * 2, parameter_unit(u)), after);
  return last;
}

void StageLowering::reduce_gradients(const Unit& u, OpIndex after) {
  if (scenario_.framework.overlap_grad_reduce && !s_.deepspeed_bf16_optimizer)
    emit_gradient_reduction(u, after);
  else
    deferred_reductions_.push_back(u);
}

// DeepSpeed's stage 3 all-reduces its gradient buckets (contiguous_gradients off, its stage-3 default, takes
// buffered_reduce_fallback: allreduce_bucket, stage3.py) and keeps its own partition.
void StageLowering::emit_gradient_reduction(const Unit& u, OpIndex after) {
  const RankParameters p = unit_parameters(u);
  const OpKind kind = s_.zero_stage == 0 || s_.deepspeed_zero3 ? OpKind::all_reduce : OpKind::reduce_scatter;
  if (const std::int64_t bytes = fsdp_reduce_pass_bytes(s_, p.dense); bytes > 0)
    after = e_.emit_after(fsdp_copy(OpRole::grad_reduce, Stream::dp_comm, bytes, parameter_unit(u)), after);
  const bool deepspeed_copies = s_.deepspeed_zero3 && s_.data_group > 1 && p.dense > 0;
  if (deepspeed_copies)  // flattened and divided before the all-reduce
    after = e_.emit_after(deepspeed_copy(OpRole::grad_reduce, p.dense * kDeepSpeedReduceCopyInBytesPerElement,
                                         parameter_unit(u)), after);
  if (s_.data_group > 1 && p.dense > 0)
    after = e_.emit_after(parameter_collective(kind, OpRole::grad_reduce, GroupKind::data, s_.data_group,
                                               p.dense * s_.reduce_bytes, parameter_unit(u)), after);
  if (deepspeed_copies)  // copied back into each gradient after it
    after = e_.emit_after(deepspeed_copy(OpRole::grad_reduce, p.dense * kDeepSpeedReduceCopyOutBytesPerElement,
                                         parameter_unit(u)), after);
  if (s_.expert_data_group > 1 && p.expert > 0)
    e_.emit_after(parameter_collective(kind, OpRole::grad_reduce, GroupKind::expert_data, s_.expert_data_group,
                                       p.expert * s_.reduce_bytes, parameter_unit(u)), after);
}

// DeepSpeed's BF16_Optimizer (microsoft/DeepSpeed 56c522386, unchanged through July 2022): the pipeline engine's
// _bf16_reduce_grads hands the optimizer's flat fp32 gradient buffer to buffered_allreduce_fallback, whose
// allreduce_bucket casts it to communication_data_type (bf16 for bf16 at ZeRO stage 0), all-reduces it over the data
// group, scales it by 1/dp (gradient_average, after the reduction) and copies it back into the fp32 buffer. One
// all-reduce of the stage's parameters: the buffer is one tensor per parameter group, each above the 5e8-element
// bucket (MEMORY_OPT_ALLREDUCE_SIZE) for any stage twin prices, and the small group of biases and norms is priced
// with the large one. The memory passes run once an iteration: they belong to the optimizer phase, which the search's
// lower bound counts once (strategies/lower_bound.cpp), where a backward pass's compute is counted per micro-batch.
OpIndex StageLowering::reduce_bf16_optimizer_gradients(OpIndex after) {
  const std::int64_t elements = stage_parameters_per_rank(model_, strategy_, stage_).dense;
  if (s_.data_group == 1 || elements == 0) return kNoOp;
  const auto pass = [&](std::int64_t bytes_per_element, OpIndex before) {
    e_.set_phase(Phase::optimizer);
    const OpIndex op =
        e_.emit_after(deepspeed_copy(OpRole::grad_reduce, elements * bytes_per_element, kWholeStage), before);
    e_.set_phase(Phase::backward);
    return op;
  };
  after = pass(4 + 2, after);  // .to(bf16)
  after = e_.emit_after(parameter_collective(OpKind::all_reduce, OpRole::grad_reduce, GroupKind::data, s_.data_group,
                                             elements * 2, kWholeStage), after);
  after = pass(2 + 2, after);  // mul_(1/dp)
  return pass(2 + 4, after);   // copy_ back into fp32
}

bool StageLowering::gathers_updated_weights_ahead() const {
  return scenario_.framework.overlap_param_gather && strategy_.schedule != Schedule::double_strand &&
         (s_.zero_stage == 1 || s_.zero_stage == 2) &&
         (s_.data_group > 1 || s_.expert_data_group > 1);
}

void StageLowering::gather_updated_weights_ahead(const std::vector<ScheduleStep>& order) {
  if (!gathers_updated_weights_ahead()) return;
  std::vector<bool> chunk_seen(static_cast<std::size_t>(s_.vpp), false);
  for (const ScheduleStep& step : order) {
    if (!step.forward || chunk_seen[step.chunk]) continue;
    chunk_seen[step.chunk] = true;
    e_.begin_pass(Phase::forward, step.micro_batch, step.chunk);
    for (const Unit& u : units(step.chunk))
      if (const OpIndex gather = emit_weight_gather(u, kNoOp); gather != kNoOp)
        weights_gathered_ahead_[parameter_unit(u)] = gather;
  }
}

// Runs the units in order, each after its weights are gathered (ZeRO-3, prefetched one unit ahead; ZeRO 1/2
// with overlap_param_gather, the first forward of a unit after the gather issued at the iteration's start).
// DeepSpeed's fetch of a sub-module ends in torch.cuda.synchronize() (_synchronize_communication, stage3.py), so
// a unit starts after everything issued before it, the gradient reduction of the unit before included, and the
// next unit's prefetch is issued after that synchronisation. What its hooks did not prefetch (the live-parameter
// cap) is gathered at the unit's start, after the unit before it: exposed.
void StageLowering::run_units(const std::vector<Unit>& list, bool forward, bool reduce_after) {
  OpIndex next_gather = gather_weights(list.front(), kNoOp, forward);
  for (std::size_t i = 0; i < list.size(); ++i) {
    OpIndex this_gather = next_gather;
    if (const std::int64_t on_demand = on_demand_elements(list[i], forward); on_demand > 0) {
      Op gather = parameter_collective(OpKind::all_gather, OpRole::param_gather, GroupKind::data, s_.data_group,
                                       on_demand * 2, parameter_unit(list[i]));
      gather.host_ns = gather_host_ns(list[i], forward, true);
      emit_param_gather(gather, e_.chain);
    }
    if (s_.deepspeed_zero3) this_gather = last_on(Stream::dp_comm);
    if (i + 1 < list.size()) next_gather = gather_weights(list[i + 1], e_.chain, forward);
    if (auto ahead = weights_gathered_ahead_.find(parameter_unit(list[i])); forward && ahead != weights_gathered_ahead_.end()) {
      this_gather = ahead->second;
      weights_gathered_ahead_.erase(ahead);
    }
    e_.pending_wait = this_gather;
    // FSDP2's split_with_sizes_copy; FSDP1 gathers into the flat parameter the weights are views of: no copy.
    if (s_.pytorch_fsdp && !s_.flat_parameters && s_.zero_stage == 3 && this_gather != kNoOp) {
      e_.set_layer(list[i].kind == Unit::layer_unit ? list[i].layer : -1);
      e_.emit(fsdp_copy(OpRole::param_gather, Stream::compute, fsdp2_copy_out_bytes(unit_parameters(list[i]).dense),
                         parameter_unit(list[i])));
    }
    emit_stage_unit(list[i], forward);
    if (reduce_after) reduce_unit_gradients(list[i], e_.chain);
  }
}
}  // namespace lowering
}  // namespace twin
