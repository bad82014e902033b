// Building the hot-switching iteration: per phase, the stage graphs of the uniform lowering are copied
// once per GPU of the stage (pipeline peers renamed to the peer GPU's class), preceded by the switch
// transfers (sends on the ep_comm stream, receives on dp_comm, both in one global order so that the first
// unfinished transfer can always run).
#include "strategies/hot_switch/hot_switch_graph.hpp"

#include <array>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "strategies/lowering.hpp"
#include "strategies/rank_layout.hpp"

namespace twin {
namespace {

constexpr OpIndex kDropped = std::numeric_limits<OpIndex>::max();
constexpr std::int64_t kSwitchTagBase = std::int64_t{1} << 48;
constexpr std::int64_t kHandoffTag = std::int64_t{1} << 50;

// Copies the ops of `from` that `keep` accepts into `to` (after what it holds), with the edges between
// them; `peer_class` renames a pipeline peer. Returns old index -> new index (kDropped when not kept).
template <class Keep, class PeerClass>
std::vector<OpIndex> copy_ops(const RankClass& from, RankClass& to, Keep keep, PeerClass peer_class) {
  std::vector<OpIndex> index(from.size(), kDropped);
  for (OpIndex i = 0; i < from.size(); ++i) {
    if (!keep(from.op(i))) continue;
    Op op = from.op(i);
    if ((op.kind == OpKind::send || op.kind == OpKind::recv) && !is_ring_send(op))
      op.peer = peer_class(op.peer);
    index[i] = to.add(op);
  }
  for (auto [e, end] = boost::edges(from.graph); e != end; ++e) {
    const OpIndex a = index[boost::source(*e, from.graph)], b = index[boost::target(*e, from.graph)];
    if (a != kDropped && b != kDropped) to.add_dependency(a, b);
  }
  return index;
}

bool is_optimizer(const Op& op) { return op.phase == Phase::optimizer; }

// The switch unit an op computes on: 0 embedding, 1 + layer, L + 1 output; -1 for none.
int unit_of(const Op& op, int num_layers) {
  if (op.layer >= 0) return op.layer + 1;
  if (op.role == OpRole::embedding) return 0;
  if (op.role == OpRole::final_norm || op.role == OpRole::output_projection || op.role == OpRole::loss)
    return num_layers + 1;
  return -1;
}

Op transfer_op(OpKind kind, const SwitchTransfer& t, const std::vector<SwitchUnit>& units, int peer, std::int64_t tag) {
  Op op;
  op.kind = kind;
  op.role = t.gradient ? OpRole::grad_reduce : OpRole::param_gather;
  op.phase = Phase::forward;
  op.stream = kind == OpKind::send ? Stream::ep_comm : Stream::dp_comm;
  op.layer = units[t.unit].layer;
  op.bytes = t.bytes;
  op.peer = peer;
  op.p2p_tag = tag;
  op.transfer = t.gradient ? Transfer::switch_gradients : Transfer::switch_weights;
  return op;
}

Op handoff_op(OpKind kind, int peer) {
  Op op;
  op.kind = kind;
  op.role = OpRole::phase_handoff;
  op.stream = kind == OpKind::send ? Stream::ep_comm : Stream::dp_comm;
  op.peer = peer;
  op.p2p_tag = kHandoffTag;
  op.transfer = Transfer::phase_handoff;
  return op;
}

int stage_size(const Strategy& s) {
  return s.tensor_model_parallel_size * s.context_parallel_size * s.data_parallel_size;
}

RankClass& new_class(IterationGraph& graph, const Scenario& scenario, int index, int rank) {
  RankClass& rc = graph.classes[index];
  rc.index = index;
  rc.num_ranks = 1;
  rc.first_rank = rank;
  rc.node_group = scenario.cluster.node_group_index_of_rank(rank);
  return rc;
}

// Makes `waiter` wait for `first` in class `rc` for the first op of every stream after `from`.
void first_of_each_stream_after(RankClass& rc, OpIndex from, OpIndex first) {
  std::array<bool, kStreamCount> seen{};
  for (OpIndex i = from; i < rc.size(); ++i) {
    const int stream = static_cast<int>(rc.op(i).stream);
    if (seen[stream]) continue;
    seen[stream] = true;
    rc.add_dependency(first, i);
  }
}

// The ops of one unit's switch transfers that a rank receives: its weights, and the gradients accumulated before.
struct SwitchArrivals {
  std::vector<std::vector<OpIndex>> weights, gradients;  // by unit
};

// The switch into phase p, in the plan's global order: the sends and receives of `rank`.
SwitchArrivals add_switch_transfers(RankClass& rc, const SwitchPlan& plan, const std::vector<SwitchUnit>& units, int p,
                                    int world, int rank) {
  SwitchArrivals arrivals{std::vector<std::vector<OpIndex>>(units.size()),
                          std::vector<std::vector<OpIndex>>(units.size())};
  for (std::size_t k = 0; k < plan.transfers.size(); ++k) {
    const SwitchTransfer& t = plan.transfers[k];
    const std::int64_t tag = kSwitchTagBase + static_cast<std::int64_t>(k);
    if (t.from_rank == rank) rc.add(transfer_op(OpKind::send, t, units, p * world + t.to_rank, tag));
    if (t.to_rank == rank) {
      const OpIndex arrival = rc.add(transfer_op(OpKind::recv, t, units, p * world + t.from_rank, tag));
      (t.gradient ? arrivals.gradients : arrivals.weights)[t.unit].push_back(arrival);
    }
  }
  return arrivals;
}

// Each unit's first compute waits for that unit's weights only, and its first backward compute (the first to add to
// its gradients) for the gradients accumulated before: they arrive as the value its gradients start from, at one GPU
// of each reduction group, whose reduction at the phase's end adds them in once.
void wait_for_arrivals(RankClass& rc, OpIndex phase_begin, const SwitchArrivals& arrivals, int num_layers) {
  std::vector<bool> waited(arrivals.weights.size(), false), waited_backward(arrivals.weights.size(), false);
  for (OpIndex i = phase_begin; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    const int unit = unit_of(op, num_layers);
    if (op.is_communication() || unit < 0) continue;
    if (!waited[unit]) {
      waited[unit] = true;
      for (OpIndex arrival : arrivals.weights[unit]) rc.add_dependency(arrival, i);
    }
    if (op.phase == Phase::backward && !waited_backward[unit]) {
      waited_backward[unit] = true;
      for (OpIndex arrival : arrivals.gradients[unit]) rc.add_dependency(arrival, i);
    }
  }
}

// The hand-off to the next phase's class of this rank, after the last op of every stream.
void add_handoff_send(RankClass& rc, int to_class) {
  std::array<OpIndex, kStreamCount> last;
  last.fill(kDropped);
  for (OpIndex i = 0; i < rc.size(); ++i) last[static_cast<int>(rc.op(i).stream)] = i;
  const OpIndex send = rc.add(handoff_op(OpKind::send, to_class));
  for (OpIndex i : last)
    if (i != kDropped) rc.add_dependency(i, send);
}

}  // namespace

IterationGraph lower_phase(const Scenario& scenario, const HotSwitchPhase& phase, const Profile& profile,
                           bool keep_optimizer) {
  const Scenario lowered_for = phase_scenario(scenario, phase.workload, phase.packs);
  IterationGraph graph = lower_to_op_graphs(lowered_for, phase.strategy, profile);
  scale_attention(graph, attention_scale(phase.workload, phase.packs));
  if (keep_optimizer) return graph;
  IterationGraph stripped;
  stripped.classes.resize(graph.classes.size());
  for (std::size_t c = 0; c < graph.classes.size(); ++c) {
    RankClass& to = stripped.classes[c];
    const RankClass& from = graph.classes[c];
    to.index = from.index;
    to.pipeline = from.pipeline;
    to.stage = from.stage;
    to.num_ranks = from.num_ranks;
    to.first_rank = from.first_rank;
    to.node_group = from.node_group;
    to.spans = from.spans;
    to.label = from.label;
    copy_ops(from, to, [](const Op& op) { return !is_optimizer(op); }, [](int peer) { return peer; });
  }
  return stripped;
}

HotSwitchIteration build_hot_switch_iteration(const Scenario& scenario, const std::vector<HotSwitchPhase>& phases,
                                              const Profile& profile) {
  const int world = scenario.cluster.total_gpus();
  const int count = static_cast<int>(phases.size());
  const std::vector<SwitchUnit> units = switch_units(scenario.model);
  HotSwitchIteration out;
  out.graph.classes.resize(static_cast<std::size_t>(count * world));
  for (int p = 0; p < count; ++p) {
    const Strategy& s = phases[p].strategy;
    const bool home = p == count - 1;
    const Strategy& previous = p == 0 ? phases.back().strategy : phases[p - 1].strategy;
    out.switches.push_back(count > 1 ? plan_switch(scenario.model, scenario.cluster, previous, s, p > 0) : SwitchPlan{});
    const SwitchPlan& plan = out.switches.back();
    const IterationGraph stages = lower_phase(scenario, phases[p], profile, true);
    const int per_stage = stage_size(s);
    for (int rank = 0; rank < world; ++rank) {
      const int stage = rank / per_stage;
      const RankClass& stage_class = stages.classes[stage];
      RankClass& rc = new_class(out.graph, scenario, p * world + rank, rank);
      rc.stage = stage;
      rc.spans = stage_class.spans;
      rc.label = fmt::format("phase {} (<= {}) stage {}", p + 1, phases[p].workload.max_length, stage);
      OpIndex handoff = kDropped;
      if (p > 0) handoff = rc.add(handoff_op(OpKind::recv, (p - 1) * world + rank));
      const SwitchArrivals arrivals = add_switch_transfers(rc, plan, units, p, world, rank);
      const auto peer_class = [&](int peer_stage) { return p * world + rank + (peer_stage - stage) * per_stage; };
      const OpIndex phase_begin = static_cast<OpIndex>(rc.size());
      copy_ops(stage_class, rc, [](const Op& op) { return !is_optimizer(op); }, peer_class);
      wait_for_arrivals(rc, phase_begin, arrivals, scenario.model.num_layers);
      if (home) copy_ops(stage_class, rc, is_optimizer, peer_class);
      if (handoff != kDropped) first_of_each_stream_after(rc, 1, handoff);
      if (!home) add_handoff_send(rc, (p + 1) * world + rank);
    }
  }
  return out;
}

IterationGraph switch_only_graph(const Scenario& scenario, const SwitchPlan& plan, const Strategy& to) {
  const int world = scenario.cluster.total_gpus();
  const std::vector<SwitchUnit> units = switch_units(scenario.model);
  IterationGraph graph;
  graph.classes.resize(static_cast<std::size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    RankClass& rc = new_class(graph, scenario, rank, rank);
    rc.spans = group_spans(to, scenario.cluster, rank / stage_size(to));
    rc.label = fmt::format("rank {}", rank);
  }
  for (std::size_t k = 0; k < plan.transfers.size(); ++k) {
    const SwitchTransfer& t = plan.transfers[k];
    const std::int64_t tag = kSwitchTagBase + static_cast<std::int64_t>(k);
    graph.classes[t.from_rank].add(transfer_op(OpKind::send, t, units, t.to_rank, tag));
    graph.classes[t.to_rank].add(transfer_op(OpKind::recv, t, units, t.from_rank, tag));
  }
  return graph;
}

IterationResult fold_phase_classes(IterationResult result, int world, int phases) {
  if (phases < 1 || result.classes.size() != static_cast<std::size_t>(world * phases)) return result;
  const int last = (phases - 1) * world;
  int critical = 0;
  for (int rank = 0; rank < world; ++rank)
    if (result.classes[last + rank].finish_ns > result.classes[last + critical].finish_ns) critical = rank;
  TimeBreakdown sum;
  for (int p = 0; p < phases; ++p) {
    const TimeBreakdown& b = result.classes[p * world + critical].breakdown;
    sum.compute_ns += b.compute_ns;
    sum.exposed_communication_ns += b.exposed_communication_ns;
    sum.optimizer_ns += b.optimizer_ns;
  }
  const TimeNs finish = result.classes[last + critical].finish_ns;
  sum.bubble_ns = std::max<TimeNs>(0, finish - sum.compute_ns - sum.exposed_communication_ns - sum.optimizer_ns);
  result.critical_class = last + critical;
  result.breakdown = sum;
  return result;
}

}  // namespace twin
