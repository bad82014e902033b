// Flattening: one pass over each Boost graph for CSR successors, stream order and dependency counts, a price cache so
// that each distinct op shape is priced once, plans made once per distinct (kind, bytes, span) (from the
// profile's measured table when it has one, else tuned and scaled by the profile's fitted correction),
// and a sorted map that pairs pipeline sends with their receives.
#include "sim/flat_graph.hpp"

#include "sim/measured_collectives.hpp"
#include "sim/price_cache.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace twin::sim {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

std::string describe(const IterationGraph& graph, int rank_class, OpIndex index) {
  return op_id(rank_class, index) + " (" + op_name(graph.classes[rank_class].op(index)) + ")";
}

// Lowering repeats a handful of shapes across layers and micro-batches, so ops that would be priced
// alike share one call to compute_time_ns (price_key: sim/price_cache.hpp); a search's simulations also
// share a PriceCache.
class ComputeTimes {
 public:
  ComputeTimes(const Profile& profile, const GpuSpec& gpu, PriceCache* shared)
      : profile_(profile), gpu_(gpu), shared_(shared) {}
  TimeNs operator()(const Op& op) {
    const PriceKey key = price_key(op);
    auto [it, inserted] = cache_.try_emplace(key, 0);
    if (!inserted) return it->second;
    const auto price = [&] { return compute_time_ns(profile_, gpu_, op); };
    it->second = shared_ ? shared_->get_or_compute(gpu_, key, price) : price();
    return it->second;
  }

 private:
  const Profile& profile_;
  const GpuSpec& gpu_;
  PriceCache* shared_;
  std::unordered_map<PriceKey, TimeNs, PriceKeyHash, PriceKeyEqual> cache_;
};

// Every link a plan crosses must exist: a zero bandwidth would stall the flow forever.
// `op` names the op in the error: (graph, class, index).
struct OpRef {
  const IterationGraph& graph;
  int rank_class;
  OpIndex index;
  std::string describe() const { return twin::sim::describe(graph, rank_class, index); }
};

void require_links(const CollectivePlan& plan, const LinkParams& links, const OpRef& op) {
  for (int p = 0; p < plan.phase_count; ++p) {
    for (int f = 0; f < plan.phases[p].flow_count; ++f) {
      for (int link = 0; link < kLinkKindCount; ++link) {
        if ((plan.phases[p].flows[f].links & (1 << link)) && !(links.bandwidth_GBps[link] > 0))
          throw std::invalid_argument(op.describe() + " needs the " + (link == 0 ? "intra" : "inter") +
                                      "-node link, which has no bandwidth on this cluster");
      }
    }
  }
}

// A collective priced by the algorithm models (no measured table) on GPUs whose kernel profile carries
// a fitted correction for its kind runs `factor` times as long alone: every phase's latency and bytes
// scale by it (profile.hpp, KindCorrection).
void apply_correction(CollectivePlan& plan, const Profile& profile, const GpuSpec& gpu, OpKind kind) {
  if (profile.gpus.empty()) return;
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  if (kernels.corrections.empty()) return;
  auto correction = kernels.corrections.find(to_string(kind));
  if (correction == kernels.corrections.end()) return;
  const double factor = correction->second.factor;
  for (int p = 0; p < plan.phase_count; ++p) {
    CollectivePhase& phase = plan.phases[p];
    phase.latency_ns = static_cast<TimeNs>(std::llround(static_cast<double>(phase.latency_ns) * factor));
    for (int f = 0; f < phase.flow_count; ++f) phase.flows[f].bytes *= factor;
  }
}

class PlanTable {
 public:
  // `gpu`: the class's GPUs, whose measured tables (if the profile has any) replace the algorithm models.
  PlanTable(FlatClass& flat, const Profile& profile, const GpuSpec& gpu) : flat_(flat), profile_(profile), gpu_(gpu) {}
  std::uint32_t collective(const Op& op, const GroupSpan& span, const OpRef& what) {
    return find_or_add({static_cast<int>(op.kind), op.bytes, span.size, span.ranks_per_node, span.nodes}, [&] {
      const CollectiveTable* table = span.size > 1 ? measured_collective(profile_, gpu_.name, op.kind, span) : nullptr;
      if (table) return measured_collective_plan(*table, op.bytes, flat_.links);
      CollectivePlan plan = tune_collective(op.kind, op.bytes, span, flat_.links);
      apply_correction(plan, profile_, gpu_, op.kind);
      return plan;
    }, what);
  }
  std::uint32_t point_to_point(Bytes bytes, LinkKind link, const OpRef& what) {
    return find_or_add({-1 - link_index(link), bytes, 0, 0, 0}, [&] {
      const CollectiveTable* table = measured_point_to_point(profile_, gpu_.name, link);
      return table ? measured_collective_plan(*table, bytes, flat_.links) : point_to_point_plan(bytes, link, flat_.links);
    }, what);
  }

 private:
  using Key = std::tuple<int, Bytes, int, int, int>;
  template <class MakePlan>
  std::uint32_t find_or_add(const Key& key, MakePlan make_plan, const OpRef& what) {
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    CollectivePlan plan = make_plan();
    require_links(plan, flat_.links, what);
    const auto index = static_cast<std::uint32_t>(flat_.plans.size());
    flat_.plans.push_back(plan);
    index_.emplace(key, index);
    return index;
  }
  FlatClass& flat_;
  const Profile& profile_;
  const GpuSpec& gpu_;
  std::map<Key, std::uint32_t> index_;
};

struct PipelineEnds {
  std::int64_t send = -1;
  std::int64_t recv = -1;
};
using PipelineKey = std::tuple<int, int, std::int64_t>;  // sender class, receiver class, tag

// The plan of collective or ring send i of class c, as the engine runs it (a ring step on the link its group
// crosses; a collective on its group's span). Throws std::logic_error for a collective without a group or whose
// group size matches no span of the class.
std::uint32_t communication_plan(const IterationGraph& graph, int c, OpIndex i, PlanTable& plans) {
  const RankClass& rank_class = graph.classes[c];
  const Op& op = rank_class.op(i);
  if (is_ring_send(op)) {
    const bool crosses_nodes = rank_class.spans[static_cast<int>(op.group)].nodes > 1;
    return plans.point_to_point(op.bytes, crosses_nodes ? LinkKind::inter_node : LinkKind::intra_node,
                                OpRef{graph, c, i});
  }
  if (op.group == GroupKind::none) throw std::logic_error(describe(graph, c, i) + ": a collective needs a group");
  const GroupSpan* span = rank_class.span_of(op.group, op.group_size);
  if (!span)
    throw std::logic_error(describe(graph, c, i) + ": group_size " + std::to_string(op.group_size) + " but the " +
                           to_string(op.group) + " span has size " +
                           std::to_string(rank_class.spans[static_cast<int>(op.group)].size));
  return plans.collective(op, *span, OpRef{graph, c, i});
}

// What op i is: a compute op's price, a collective's plan, a pipeline transfer's end.
void classify_op(const IterationGraph& graph, int c, std::uint32_t i, FlatOp& flat_op, PlanTable& plans,
                 ComputeTimes& compute_times, std::map<PipelineKey, PipelineEnds>& pipeline) {
  const RankClass& rank_class = graph.classes[c];
  const int classes = static_cast<int>(graph.classes.size());
  const Op& op = rank_class.op(i);
  flat_op.optimizer = op.phase == Phase::optimizer;
  flat_op.message_bytes = static_cast<double>(op.bytes);
  if (!op.is_communication()) {
    flat_op.kind = OpClass::compute;
    flat_op.nominal_ns = compute_times(op);
    return;
  }
  flat_op.comm_kernel = op.comm_kernel;
  if (is_ring_send(op)) {
    flat_op.kind = OpClass::ring_send;
    flat_op.plan = communication_plan(graph, c, i, plans);
    return;
  }
  if (op.kind == OpKind::send || op.kind == OpKind::recv) {
    if (op.kind == OpKind::recv && (op.group == GroupKind::context || op.group == GroupKind::tensor))
      throw std::logic_error(describe(graph, c, i) + ": ring sends of a group stand alone; no recv expected");
    if (op.peer < 0 || op.peer >= classes)
      throw std::logic_error(describe(graph, c, i) + ": peer class " + std::to_string(op.peer) + " does not exist");
    const bool is_send = op.kind == OpKind::send;
    flat_op.kind = is_send ? OpClass::pipeline_send : OpClass::pipeline_recv;
    PipelineEnds& ends = pipeline[is_send ? PipelineKey{c, op.peer, op.p2p_tag} : PipelineKey{op.peer, c, op.p2p_tag}];
    std::int64_t& end = is_send ? ends.send : ends.recv;
    if (end >= 0)
      throw std::logic_error(describe(graph, c, i) + ": p2p_tag " + std::to_string(op.p2p_tag) + " used twice");
    end = i;
    return;
  }
  flat_op.kind = OpClass::collective;
  flat_op.plan = communication_plan(graph, c, i, plans);
}

// One pass over a class's ops (a long iteration's graph is read from memory once): each op's successors in
// CSR order (its graph out-edges), the next op of its stream, its dependency count, and what it is.
void flatten_class(const IterationGraph& graph, int c, FlatClass& flat, PlanTable& plans, ComputeTimes& compute_times,
                   std::map<PipelineKey, PipelineEnds>& pipeline) {
  const RankClass& rank_class = graph.classes[c];
  const auto n = static_cast<std::uint32_t>(rank_class.size());
  std::array<std::uint32_t, kStreamCount> last_of_stream;
  last_of_stream.fill(kNone);
  flat.successors.reserve(boost::num_edges(rank_class.graph));
  for (std::uint32_t i = 0; i < n; ++i) {
    const int stream = static_cast<int>(rank_class.op(i).stream);
    if (stream < 0 || stream >= kStreamCount)
      throw std::logic_error(describe(graph, c, i) + " is on no valid stream");
    FlatOp& op = flat.ops.emplace_back();  // written once here (a resize would write every op twice)
    op.predecessors = static_cast<std::uint32_t>(boost::in_degree(i, rank_class.graph));
    if (last_of_stream[stream] != kNone) {
      flat.ops[last_of_stream[stream]].next_in_stream = i;
      ++op.predecessors;
    }
    last_of_stream[stream] = i;
    op.successors_begin = static_cast<std::uint32_t>(flat.successors.size());
    for (auto [e, end] = boost::out_edges(i, rank_class.graph); e != end; ++e)
      flat.successors.push_back(static_cast<std::uint32_t>(boost::target(*e, rank_class.graph)));
    op.successors_end = static_cast<std::uint32_t>(flat.successors.size());
    classify_op(graph, c, i, op, plans, compute_times, pipeline);
  }
}

void pair_pipeline_transfers(const IterationGraph& graph, const Cluster& cluster,
                             const std::map<PipelineKey, PipelineEnds>& pipeline, std::vector<FlatClass>& flat,
                             std::vector<PlanTable>& plans) {
  for (const auto& [key, ends] : pipeline) {
    const auto [sender, receiver, tag] = key;
    if (ends.send < 0 || ends.recv < 0) {
      const int c = ends.send >= 0 ? sender : receiver;
      const auto i = static_cast<OpIndex>(ends.send >= 0 ? ends.send : ends.recv);
      throw std::logic_error(describe(graph, c, i) + ": no matching " + (ends.send >= 0 ? "recv" : "send") +
                             " on class " + std::to_string(ends.send >= 0 ? receiver : sender) + " with p2p_tag " +
                             std::to_string(tag));
    }
    const auto send = static_cast<std::uint32_t>(ends.send);
    const auto recv = static_cast<std::uint32_t>(ends.recv);
    const Op& send_op = graph.classes[sender].op(send);
    const Op& recv_op = graph.classes[receiver].op(recv);
    // Classes of different sizes (asymmetric plans) hold a tensor in different shards: each side's op
    // gives its own bytes per GPU. Classes of equal size must agree.
    const bool same_size = graph.classes[sender].num_ranks == graph.classes[receiver].num_ranks;
    if (send_op.bytes != recv_op.bytes && (same_size || send_op.bytes <= 0 || recv_op.bytes <= 0))
      throw std::logic_error(describe(graph, sender, send) + " and " + describe(graph, receiver, recv) +
                             " are one transfer but disagree on bytes");
    const bool same_node = cluster.node_of_rank(graph.classes[sender].first_rank) ==
                           cluster.node_of_rank(graph.classes[receiver].first_rank);
    const LinkKind link = same_node ? LinkKind::intra_node : LinkKind::inter_node;
    FlatOp& send_flat = flat[sender].ops[send];
    FlatOp& recv_flat = flat[receiver].ops[recv];
    send_flat.plan = plans[sender].point_to_point(send_op.bytes, link, OpRef{graph, sender, send});
    // The receiving GPUs' side of the link must exist too.
    require_links(flat[sender].plans[send_flat.plan], flat[receiver].links, OpRef{graph, receiver, recv});
    if (recv_op.bytes != send_op.bytes)
      send_flat.receive_scale = static_cast<double>(recv_op.bytes) / static_cast<double>(send_op.bytes);
    send_flat.peer_class = receiver;
    send_flat.peer_op = recv;
    recv_flat.peer_class = sender;
    recv_flat.peer_op = send;
  }
}

}  // namespace

LinkParams link_params(const NodeGroup& group, const Network& network, const Profile& profile) {
  LinkParams links;
  links.intra_nvlink = group.intra_node.kind != IntraNodeKind::pcie;
  links.bandwidth_GBps = {group.intra_node.bandwidth_GBps, inter_node_bandwidth_per_gpu_GBps(group, network)};
  const std::array<double, kLinkKindCount> declared_latency_us = {group.intra_node.latency_us, group.nics.latency_us};
  for (LinkKind kind : {LinkKind::intra_node, LinkKind::inter_node}) {
    const LinkProfile& link = profile.link(kind, group.intra_node.kind);
    const int index = link_index(kind);
    // The profile's per-step latency is measured (or estimated) whole; a latency the cluster declares
    // for its hardware is a floor under it, never added (that would count the hop twice).
    const double latency_us = std::max(link.latency_us, declared_latency_us[index]);
    links.step_latency_ns[index] = static_cast<TimeNs>(std::llround(latency_us * kNsPerUs));
    links.efficiency[index] = link.bandwidth;
  }
  return links;
}

void PassCompute::add(const Op& op, TimeNs ns) {
  (op.phase == Phase::forward && !op.recomputed ? forward_ns : backward_ns) += ns;
  if (op.recomputed) recomputed_ns += ns;
}

namespace {

// The pass an op belongs to: its micro-batch, chunk and direction (a recomputed forward runs in the backward
// pass); every optimizer-phase op shares one.
std::tuple<int, int, int> pass_of(const Op& op) {
  if (op.phase == Phase::optimizer) return {-1, -1, 2};
  return {op.micro_batch, op.chunk, op.phase == Phase::backward || op.recomputed ? 1 : 0};
}

// The longest communication op that waits for compute op `before` and that compute op `after` waits for, alone on
// its links; 0 for none.
TimeNs waited_through_ns(const IterationGraph& graph, int c, OpIndex before, OpIndex after, PlanTable& plans,
                         const LinkParams& links, std::vector<CollectivePlan>& made) {
  const RankClass& rank_class = graph.classes[c];
  double longest = 0;
  for (auto [e, end] = boost::in_edges(after, rank_class.graph); e != end; ++e) {
    const OpIndex between = static_cast<OpIndex>(boost::source(*e, rank_class.graph));
    const Op& op = rank_class.op(between);
    const bool collective = op.is_communication() && op.kind != OpKind::send && op.kind != OpKind::recv;
    if (!collective && !is_ring_send(op)) continue;
    const auto [out, out_end] = boost::out_edges(before, rank_class.graph);
    if (std::none_of(out, out_end, [&](const auto& edge) { return boost::target(edge, rank_class.graph) == between; }))
      continue;
    const std::uint32_t plan = communication_plan(graph, c, between, plans);
    longest = std::max(longest, isolated_time_ns(made[plan], static_cast<double>(op.bytes), links));
  }
  return static_cast<TimeNs>(std::floor(longest));  // the engine rounds its times up
}

}  // namespace

std::vector<ComputeBusy> compute_busy(const IterationGraph& graph, const Cluster& cluster, const Profile& profile,
                                      PriceCache* prices) {
  std::vector<ComputeBusy> busy;
  busy.reserve(graph.classes.size());
  for (int c = 0; c < static_cast<int>(graph.classes.size()); ++c) {
    const RankClass& rank_class = graph.classes[c];
    if (rank_class.node_group < 0 || rank_class.node_group >= static_cast<int>(cluster.node_groups.size()))
      throw std::logic_error("node group " + std::to_string(rank_class.node_group) + " does not exist");
    const NodeGroup& group = cluster.node_groups[rank_class.node_group];
    ComputeTimes compute_times(profile, group.gpu, prices);
    FlatClass plans_only;  // the plans of the communication waited through, as flattening makes them
    plans_only.links = link_params(group, cluster.network, profile);
    PlanTable plans(plans_only, profile, group.gpu);
    bool one_compute_stream = true;
    for (OpIndex i = 0; i < rank_class.size(); ++i)
      if (rank_class.op(i).stream == Stream::compute2) one_compute_stream = false;
    ComputeBusy total;
    total.stage = rank_class.stage;
    OpIndex previous = 0;
    bool any_previous = false;
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const Op& op = rank_class.op(i);
      if (op.is_communication()) continue;
      TimeNs ns = compute_times(op);
      if (one_compute_stream && op.stream == Stream::compute) {
        if (any_previous && pass_of(rank_class.op(previous)) == pass_of(op))
          ns += waited_through_ns(graph, c, previous, i, plans, plans_only.links, plans_only.plans);
        previous = i;
        any_previous = true;
      }
      if (op.phase == Phase::optimizer) {
        total.optimizer_ns += ns;
        continue;
      }
      total.passes.add(op, ns);
      if (op.chunk == 0) total.first_chunk.add(op, ns);
    }
    busy.push_back(total);
  }
  return busy;
}

FlatIteration flatten(const IterationGraph& graph, const Cluster& cluster, const Profile& profile, PriceCache* prices) {
  FlatIteration flat;
  flat.overlap = profile.overlap;
  flat.classes.resize(graph.classes.size());
  std::map<PipelineKey, PipelineEnds> pipeline;
  std::vector<PlanTable> plans;
  plans.reserve(graph.classes.size());
  for (int c = 0; c < static_cast<int>(graph.classes.size()); ++c) {
    const RankClass& rank_class = graph.classes[c];
    if (rank_class.node_group < 0 || rank_class.node_group >= static_cast<int>(cluster.node_groups.size()))
      throw std::logic_error("class " + std::to_string(c) + ": node group " + std::to_string(rank_class.node_group) +
                             " does not exist");
    plans.emplace_back(flat.classes[c], profile, cluster.node_groups[rank_class.node_group].gpu);
  }
  for (int c = 0; c < static_cast<int>(graph.classes.size()); ++c) {
    const RankClass& rank_class = graph.classes[c];
    const NodeGroup& group = cluster.node_groups[rank_class.node_group];
    FlatClass& flat_class = flat.classes[c];
    flat_class.links = link_params(group, cluster.network, profile);
    if (group.gpu.sm_count > kUserbuffersSmCount)
      flat_class.userbuffers_slowdown = double(group.gpu.sm_count) / (group.gpu.sm_count - kUserbuffersSmCount);
    flat_class.ops.reserve(rank_class.size());
    ComputeTimes compute_times(profile, group.gpu, prices);
    flatten_class(graph, c, flat_class, plans[c], compute_times, pipeline);
  }
  pair_pipeline_transfers(graph, cluster, pipeline, flat.classes, plans);
  return flat;
}

}  // namespace twin::sim
