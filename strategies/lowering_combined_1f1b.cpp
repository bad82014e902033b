// Megatron's combined 1F1B (strategies/combined_1f1b.hpp): a forward pass and a backward pass of two micro-batches
// run together, unit beside unit as TransformerModelChunkSchedulePlan.run pairs them (the forward's units in order,
// the backward's from the last): the forward's embedding before the backward's output layer, layer i beside layer
// n-1-i, the forward's output layer before the backward's embedding. A pair of MoE layers is recorded strand by
// strand with the ordinary lowering (record_unit, both on the one compute stream) and issued in
// combined_layer_order's order; any other pair runs the forward unit, then the backward unit.
#include <algorithm>
#include <stdexcept>

#include "strategies/lowering_stage.hpp"

namespace twin::lowering {

void StageLowering::emit_combined(const StrandUnit& forward, const StrandUnit& backward,
                                  const std::vector<IssuedOp>& order, OpIndex& forward_chain, OpIndex& backward_chain) {
  RankClass& rc = e_.rank_class();
  std::vector<OpIndex> forward_index(forward.ops.size(), kNoOp), backward_index(backward.ops.size(), kNoOp);
  for (const IssuedOp& issued : order) {
    const StrandUnit& strand = issued.backward ? backward : forward;
    std::vector<OpIndex>& index = issued.backward ? backward_index : forward_index;
    const OpIndex chain = issued.backward ? backward_chain : forward_chain;
    const auto source = [&](int before) {
      if (before < 0) return chain;
      if (index[before] == kNoOp) throw std::logic_error("combined 1F1B: an op issued before what it consumes");
      return index[before];
    };
    index[issued.index] = rc.add(strand.ops[issued.index]);
    for (int before : strand.predecessors[issued.index]) e_.depend(source(before), index[issued.index]);
    if (issued.also_after >= 0) e_.depend(source(issued.also_after), index[issued.index]);
  }
  if (forward.chain_after >= 0) forward_chain = forward_index[forward.chain_after];
  if (backward.chain_after >= 0) backward_chain = backward_index[backward.chain_after];
}

std::pair<OpIndex, OpIndex> StageLowering::combined_receives(const ScheduleStep& forward, const ScheduleStep& backward) {
  const int forward_vs = virtual_stage(forward.chunk), backward_vs = virtual_stage(backward.chunk);
  e_.begin_pass(Phase::forward, forward.micro_batch, forward.chunk);
  e_.chain = kNoOp;  // receives posted ahead, each as any pass receives (StageLowering::receive)
  if (forward_vs > 0)
    receive(OpRole::pipeline_activation, (forward_vs - 1) % s_.pp, p2p_tag(forward.micro_batch, forward_vs - 1, false));
  const OpIndex forward_chain = e_.chain;
  e_.begin_pass(Phase::backward, backward.micro_batch, backward.chunk);
  e_.chain = kNoOp;
  if (backward_vs < last_virtual_stage_)
    receive(OpRole::pipeline_gradient, (backward_vs + 1) % s_.pp, p2p_tag(backward.micro_batch, backward_vs, true));
  return {forward_chain, e_.chain};
}

void StageLowering::combined_units(const ScheduleStep& forward, const ScheduleStep& backward, bool reduces,
                                   OpIndex& forward_chain, OpIndex& backward_chain) {
  const std::vector<Unit> forward_units = units(forward.chunk);
  std::vector<Unit> backward_units = units(backward.chunk);
  std::reverse(backward_units.begin(), backward_units.end());
  // An MTP depth (its entry and head around its layer) runs unpaired.
  const auto moe_layer = [&](const Unit& u) {
    return u.kind == Unit::layer_unit && model_.is_moe_layer(u.layer) && !model_.is_mtp_layer(u.layer);
  };
  const bool delay_wgrad = scenario_.framework.delay_wgrad_compute;
  for (std::size_t k = 0; k < std::max(forward_units.size(), backward_units.size()); ++k) {
    const bool has_forward = k < forward_units.size(), has_backward = k < backward_units.size();
    if (has_forward && has_backward && moe_layer(forward_units[k]) && moe_layer(backward_units[k])) {
      const StrandUnit f = record_unit(forward_units[k], true, forward.micro_batch, forward.chunk, Stream::compute);
      const StrandUnit b = record_unit(backward_units[k], false, backward.micro_batch, backward.chunk, Stream::compute);
      if (const auto order = combined_layer_order(f.ops, b.ops, delay_wgrad)) {
        emit_combined(f, b, *order, forward_chain, backward_chain);
        if (reduces) reduce_gradients(backward_units[k], backward_chain);
        continue;
      }
    }
    if (has_forward) {
      e_.begin_pass(Phase::forward, forward.micro_batch, forward.chunk);
      e_.chain = forward_chain;
      emit_stage_unit(forward_units[k], true);
      forward_chain = e_.chain;
    }
    if (has_backward) {
      e_.begin_pass(Phase::backward, backward.micro_batch, backward.chunk);
      e_.chain = backward_chain;
      emit_stage_unit(backward_units[k], false);
      backward_chain = e_.chain;
      if (reduces) reduce_unit_gradients(backward_units[k], backward_chain);
    }
  }
}

void StageLowering::combined_ends(const ScheduleStep& forward, const ScheduleStep& backward, OpIndex forward_chain,
                                  OpIndex backward_chain) {
  const int forward_vs = virtual_stage(forward.chunk), backward_vs = virtual_stage(backward.chunk);
  e_.begin_pass(Phase::forward, forward.micro_batch, forward.chunk);
  if (forward_vs < last_virtual_stage_)
    e_.emit_after(p2p(OpKind::send, OpRole::pipeline_activation, (forward_vs + 1) % s_.pp,
                      p2p_tag(forward.micro_batch, forward_vs, false), 1, s_.scatter_gather_p2p),
                  forward_chain);
  e_.begin_pass(Phase::backward, backward.micro_batch, backward.chunk);
  if (backward_vs > 0)
    e_.emit_after(p2p(OpKind::send, OpRole::pipeline_gradient, (backward_vs - 1) % s_.pp,
                      p2p_tag(backward.micro_batch, backward_vs - 1, true), 1, s_.scatter_gather_p2p),
                  backward_chain);
  // FP8 delayed scaling's amax reductions of both passes (the forward's first: its autocast exits first).
  e_.begin_pass(Phase::forward, forward.micro_batch, forward.chunk);
  e_.chain = forward_chain;
  reduce_fp8_amaxes(forward.chunk, true);
  e_.begin_pass(Phase::backward, backward.micro_batch, backward.chunk);
  e_.chain = backward_chain;
  reduce_fp8_amaxes(backward.chunk, false);
}

void StageLowering::combined_pass(const ScheduleStep& forward, const ScheduleStep& backward, bool last_of_chunk) {
  auto [forward_chain, backward_chain] = combined_receives(forward, backward);
  combined_units(forward, backward, last_of_chunk || s_.reduces_every_micro_batch, forward_chain, backward_chain);
  combined_ends(forward, backward, forward_chain, backward_chain);
  if (s_.reduces_every_micro_batch) emit_deferred_reductions();
}

}  // namespace twin::lowering
