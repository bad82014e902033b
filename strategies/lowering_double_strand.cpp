// Double-strand passes (DHeLlam). Each unit pass runs the forward strand on the compute stream and the
// backward strand on compute2, unit beside unit (a layer beside its mirror). Each strand's ops for one
// unit are first emitted into a scratch graph with the ordinary layer lowering, then copied in the order
// of the pairing's blocks: a block's segments start only after the other strand's previous segment has
// ended, which is how the engine replays the plan. One p2p per pass carries both strands' tensors.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/collectives.hpp"
#include "sim/flat_graph.hpp"
#include "strategies/lowering_stage.hpp"

namespace twin::lowering {
namespace {

// The scratch graph's stand-in for the strand's chain: a stream no layer op uses, so that every op
// that consumes the chain gets an explicit edge from it.
constexpr Stream kChainStream = Stream::pp_recv;

// The pairing's view of an op: its time alone with this class's GPUs and links.
StrandOp price(const Op& op, const Profile& profile, const Scenario& scenario, const RankClass& rc) {
  const NodeGroup& group = scenario.cluster.node_groups[rc.node_group];
  if (!op.is_communication()) return {compute_time_ns(profile, group.gpu, op), Stream::compute};
  const sim::LinkParams links = sim::link_params(group, scenario.cluster.network, profile);
  const GroupSpan& span = rc.spans[static_cast<int>(op.group)];
  sim::CollectivePlan plan;
  if (op.kind == OpKind::send)
    plan = sim::point_to_point_plan(op.bytes, span.nodes > 1 ? LinkKind::inter_node : LinkKind::intra_node, links);
  else
    plan = sim::collective_plan(op, span, links);  // a flex exchange: its deduplicated plan, as the engine prices it
  return {static_cast<TimeNs>(sim::isolated_time_ns(plan, static_cast<double>(op.bytes), links)), op.stream};
}

int unit_key(const Unit& unit, const ModelConfig& model) {
  if (unit.kind != Unit::layer_unit) return unit.kind == Unit::embedding_unit ? 0 : 1;
  return model.is_moe_layer(unit.layer) ? 3 : 2;
}

std::string unit_text(const Unit& unit, const ModelConfig& model) {
  switch (unit.kind) {
    case Unit::embedding_unit: return "embedding";
    case Unit::head_unit: return "output layer";
    case Unit::layer_unit: return model.is_moe_layer(unit.layer) ? "MoE layer" : "layer";
  }
  throw std::logic_error("unit_text: a unit outside Unit::Kind");
}

// "fc2.fwd" without the layer: the summary describes every layer pair of its kind.
std::string segment_text(const std::vector<Op>& ops, int begin, int end) {
  if (begin == end) return "–";
  std::string text;
  for (int k = begin; k < end; ++k) {
    const Op& op = ops[k];
    text += fmt::format("{}{}{}.{}", k == begin ? "" : " + ", op.recomputed ? "recomputed " : "", to_string(op.role),
                        op.phase == Phase::forward ? "fwd" : "bwd");
  }
  return text;
}

// Ops of [begin, end) with no predecessor (sources) or no successor (sinks) inside the range: the
// segment's first and last ops, counting stream order.
std::vector<int> segment_ends(const std::vector<Op>& ops, const std::vector<std::vector<int>>& predecessors,
                              int begin, int end, bool sources) {
  std::vector<bool> linked(static_cast<std::size_t>(end - begin), false);
  for (int k = begin; k < end; ++k) {
    for (int before : predecessors[k])
      if (before >= begin) linked[(sources ? k : before) - begin] = true;
    for (int before = begin; before < k; ++before)
      if (ops[before].stream == ops[k].stream) linked[(sources ? k : before) - begin] = true;
  }
  std::vector<int> ends;
  for (int k = begin; k < end; ++k)
    if (!linked[k - begin]) ends.push_back(k);
  return ends;
}

}  // namespace

StageLowering::StrandUnit StageLowering::record_unit(const Unit& unit, bool forward, int micro_batch, int chunk,
                                                     Stream backward_compute) const {
  RankClass scratch;
  Op chain_stand_in;
  chain_stand_in.stream = kChainStream;
  scratch.add(chain_stand_in);
  Emitter e(scratch, s_);
  e.begin_pass(forward ? Phase::forward : Phase::backward, micro_batch, chunk);
  e.chain = 0;
  emit_unit(e, model_, unit, forward);
  StrandUnit strand;
  const auto n = static_cast<int>(scratch.size()) - 1;
  strand.ops.reserve(static_cast<std::size_t>(n));
  strand.predecessors.resize(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    Op op = scratch.op(static_cast<OpIndex>(k + 1));
    if (!forward && op.stream == Stream::compute) op.stream = backward_compute;
    strand.ops.push_back(op);
    for (auto [edge, last] = boost::in_edges(static_cast<OpIndex>(k + 1), scratch.graph); edge != last; ++edge)
      strand.predecessors[k].push_back(static_cast<int>(boost::source(*edge, scratch.graph)) - 1);
  }
  strand.chain_after = static_cast<int>(e.chain) - 1;
  return strand;
}

const StrandPairing& StageLowering::pairing_for(const Unit& forward_unit, const StrandUnit& forward,
                                                const Unit& backward_unit, const StrandUnit& backward,
                                                std::vector<StrandPairingSummary>* pairings) {
  const std::pair<int, int> key{unit_key(forward_unit, model_), unit_key(backward_unit, model_)};
  auto it = pairings_.find(key);
  if (it != pairings_.end()) return it->second;
  const RankClass& rc = e_.rank_class();
  const auto strand_view = [&](const StrandUnit& strand) {
    std::vector<StrandOp> view;
    for (const Op& op : strand.ops) view.push_back(price(op, *profile_, scenario_, rc));
    return view;
  };
  StrandPairing pairing = pair_strands(strand_view(forward), strand_view(backward), profile_->overlap);
  if (pairings) {
    StrandPairingSummary summary;
    summary.forward_unit = unit_text(forward_unit, model_);
    summary.backward_unit = unit_text(backward_unit, model_);
    for (const PairedBlock& block : pairing.blocks) {
      summary.blocks.push_back(segment_text(forward.ops, block.forward_begin, block.forward_end) + " ‖ " +
                               segment_text(backward.ops, block.backward_begin, block.backward_end));
      if (block.forward_begin != block.forward_end && block.backward_begin != block.backward_end)
        ++summary.paired_blocks;
    }
    summary.serial_ns = pairing.serial_ns;
    summary.paired_ns = pairing.estimated_ns;
    pairings->push_back(std::move(summary));
  }
  return pairings_.emplace(key, std::move(pairing)).first->second;
}

void StageLowering::emit_paired(const StrandUnit& forward, const StrandUnit& backward, const StrandPairing& pairing,
                                OpIndex& forward_chain, OpIndex& backward_chain) {
  RankClass& rc = e_.rank_class();
  std::vector<OpIndex> forward_index(forward.ops.size(), kNoOp), backward_index(backward.ops.size(), kNoOp);
  std::vector<OpIndex> forward_sinks, backward_sinks;  // of each strand's latest segment
  const auto copy = [&](const StrandUnit& strand, std::vector<OpIndex>& index, OpIndex chain, int begin, int end,
                        const std::vector<OpIndex>& other_sinks) {
    for (int k = begin; k < end; ++k) {
      index[k] = rc.add(strand.ops[k]);
      for (int before : strand.predecessors[k]) e_.depend(before < 0 ? chain : index[before], index[k]);
    }
    for (int k : segment_ends(strand.ops, strand.predecessors, begin, end, true))
      for (OpIndex sink : other_sinks) e_.depend(sink, index[k]);
    std::vector<OpIndex> sinks;
    for (int k : segment_ends(strand.ops, strand.predecessors, begin, end, false)) sinks.push_back(index[k]);
    return sinks;
  };
  for (const PairedBlock& block : pairing.blocks) {
    const std::vector<OpIndex> previous_forward_sinks = forward_sinks;
    if (block.forward_begin != block.forward_end)
      forward_sinks = copy(forward, forward_index, forward_chain, block.forward_begin, block.forward_end, backward_sinks);
    if (block.backward_begin != block.backward_end)
      backward_sinks =
          copy(backward, backward_index, backward_chain, block.backward_begin, block.backward_end, previous_forward_sinks);
  }
  if (forward.chain_after >= 0) forward_chain = forward_index[forward.chain_after];
  if (backward.chain_after >= 0) backward_chain = backward_index[backward.chain_after];
}

void StageLowering::strand_pass(const StrandStep& step, bool reduce_after, std::vector<StrandPairingSummary>* pairings) {
  const int fmb = step.forward_micro_batch, bmb = step.backward_micro_batch;
  const int tensors = (fmb >= 0 ? 1 : 0) + (bmb >= 0 ? 1 : 0);
  const OpRole role = fmb >= 0 ? OpRole::pipeline_activation : OpRole::pipeline_gradient;
  // Down passes flow from stage 0 to pp-1, up passes back; the fold turns at the last stage.
  const int from = step.down ? stage_ - 1 : stage_ + 1;
  const int to = step.down ? stage_ + 1 : stage_ - 1;
  e_.begin_pass(Phase::forward, fmb >= 0 ? fmb : bmb, step.forward_chunk());
  // One transfer per pass carries both strands' tensors, and says so.
  const auto transfer = [&](OpKind kind, int peer) {
    Op op = p2p(kind, role, peer, p2p_tag(step.unit, std::min(peer, stage_), !step.down), tensors);
    op.transfer = Transfer::strands;
    op.strands = {fmb, bmb, static_cast<std::int16_t>(fmb >= 0 ? step.forward_chunk() : -1),
                  static_cast<std::int16_t>(bmb >= 0 ? step.backward_chunk() : -1)};
    return op;
  };
  OpIndex recv = kNoOp;
  if (from >= 0 && from < s_.pp) recv = e_.emit_after(transfer(OpKind::recv, from), kNoOp);
  const auto start = [&](int mb) { return mb < 0 ? kNoOp : recv != kNoOp ? recv : last_of_micro_batch_[mb]; };
  OpIndex forward_chain = start(fmb), backward_chain = start(bmb);

  const std::vector<Unit> forward_units = units(step.forward_chunk());
  std::vector<Unit> backward_units = units(step.backward_chunk());
  std::reverse(backward_units.begin(), backward_units.end());
  const StrandUnit none;
  for (std::size_t k = 0; k < std::max(forward_units.size(), backward_units.size()); ++k) {
    const bool has_forward = fmb >= 0 && k < forward_units.size();
    const bool has_backward = bmb >= 0 && k < backward_units.size();
    const StrandUnit forward = has_forward ? record_unit(forward_units[k], true, fmb, step.forward_chunk()) : none;
    const StrandUnit backward = has_backward ? record_unit(backward_units[k], false, bmb, step.backward_chunk()) : none;
    StrandPairing alone;
    if (has_forward) alone.blocks.push_back({0, static_cast<int>(forward.ops.size()), 0, 0});
    if (has_backward) alone.blocks.push_back({0, 0, 0, static_cast<int>(backward.ops.size())});
    const StrandPairing& pairing = has_forward && has_backward
                                       ? pairing_for(forward_units[k], forward, backward_units[k], backward, pairings)
                                       : alone;
    emit_paired(forward, backward, pairing, forward_chain, backward_chain);
    if (has_backward && reduce_after) reduce_gradients(backward_units[k], backward_chain);
  }
  if (fmb >= 0) last_of_micro_batch_[fmb] = forward_chain;
  if (bmb >= 0) last_of_micro_batch_[bmb] = backward_chain;
  if (to >= 0 && to < s_.pp) {
    e_.set_layer(-1);
    const OpIndex send = e_.emit_after(transfer(OpKind::send, to), forward_chain);
    e_.depend(backward_chain, send);
  }
}

void StageLowering::run_double_strand(int stage, const std::vector<StrandStep>& order,
                                      std::vector<StrandPairingSummary>* pairings) {
  begin_stage(stage);
  int micro_batches = 0;
  for (const StrandStep& step : order) micro_batches = std::max(micro_batches, step.forward_micro_batch + 1);
  last_of_micro_batch_.assign(static_cast<std::size_t>(micro_batches), kNoOp);
  // Gradients of a chunk are complete after the last micro-batch's backward over it.
  for (const StrandStep& step : order)
    strand_pass(step, step.backward_micro_batch == micro_batches - 1, pairings);
  optimizer_phase();
}

}  // namespace twin::lowering
