// Flattening: one pass over each class's ops for CSR successors, stream order and dependency counts, each compute
// op priced and each communication op's plan made (flat_pricing.hpp), and the pipeline sends paired with their
// receives once every class is in. Classes are added one at a time (Flattener), so that a lowering may
// hand them over one after another and reuse their storage (strategies/lowering.hpp, lower_class_by_class).
#include "sim/flat_graph.hpp"

#include "sim/flat_pricing.hpp"
#include "sim/rank_drift.hpp"
#include "sim/step_clock.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <stdexcept>
#include <tuple>

namespace twin::sim {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// A pipeline transfer's end: the ends are paired once every class is in, when the classes added first may be gone
// (lower_class_by_class), by sorting them on their transfer's key (a sorted map of them cost a heap node per transfer).
using PipelineKey = std::tuple<int, int, std::int64_t>;  // sender class, receiver class, tag
struct PipelineEnd {
  PipelineKey key;
  bool send = false;
  std::uint32_t op = 0;
  Bytes bytes = 0;
};
using PipelineTransfers = std::vector<PipelineEnd>;

// What op i is: a compute op's price, a collective's plan, a pipeline transfer's end.
void classify_op(const IterationGraph& graph, int c, std::uint32_t i, FlatOp& flat_op, PlanTable& plans,
                 ComputeTimes& compute_times, InterferenceIndex& interference, PipelineTransfers& pipeline) {
  const RankClass& rank_class = graph.classes[c];
  const int classes = static_cast<int>(graph.classes.size());
  const Op& op = rank_class.op(i);
  flat_op.optimizer = op.phase == Phase::optimizer;
  flat_op.message_bytes = static_cast<double>(op.bytes);
  if (!op.is_communication()) {
    flat_op.kind = OpClass::compute;
    flat_op.nominal_ns = compute_times(op);
    flat_op.interference = interference.band_of(op);
    return;
  }
  flat_op.comm_kernel = op.comm_kernel;
  if (op.comm_kernel == CommKernel::nccl) flat_op.interference = interference.row_of(op);
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
    pipeline.push_back({is_send ? PipelineKey{c, op.peer, op.p2p_tag} : PipelineKey{op.peer, c, op.p2p_tag}, is_send,
                        i, op.bytes});
    return;
  }
  flat_op.kind = OpClass::collective;
  flat_op.group = op.group;
  flat_op.plan = communication_plan(graph, c, i, plans);
}

// Op i repeats `original` (RankClass::repeats), flattened before it: equal but for its context, it costs what the
// original costs, needs the same plan and is the same kind (a pipeline transfer's end, which is paired by its tag,
// is classified as itself).
bool copy_class(const FlatOp& original, FlatOp& flat_op) {
  if (original.kind == OpClass::pipeline_send || original.kind == OpClass::pipeline_recv) return false;
  flat_op.nominal_ns = original.nominal_ns;
  flat_op.plan = original.plan;
  flat_op.message_bytes = original.message_bytes;
  flat_op.kind = original.kind;
  flat_op.optimizer = original.optimizer;
  flat_op.comm_kernel = original.comm_kernel;
  flat_op.group = original.group;
  flat_op.interference = original.interference;
  return true;
}

// One pass over a class's ops (a long iteration's graph is read from memory once): each op's successors in
// CSR order (its graph out-edges), the next op of its stream, its dependency count, and what it is (a repeated
// op as its original is).
void flatten_class(const IterationGraph& graph, int c, FlatClass& flat, PlanTable& plans, ComputeTimes& compute_times,
                   InterferenceIndex& interference, PipelineTransfers& pipeline) {
  const RankClass& rank_class = graph.classes[c];
  const auto n = static_cast<std::uint32_t>(rank_class.size());
  std::array<std::uint32_t, kStreamCount> last_of_stream;
  last_of_stream.fill(kNone);
  flat.successors.reserve(boost::num_edges(rank_class.graph));
  flat.predecessors.reserve(n);
  auto repeat = rank_class.repeats.begin();
  for (std::uint32_t i = 0; i < n; ++i) {
    const int stream = static_cast<int>(rank_class.op(i).stream);
    if (stream < 0 || stream >= kStreamCount)
      throw std::logic_error(describe(graph, c, i) + " is on no valid stream");
    FlatOp& op = flat.ops.emplace_back();  // written once here (a resize would write every op twice)
    std::uint32_t& predecessors =
        flat.predecessors.emplace_back(static_cast<std::uint32_t>(boost::in_degree(i, rank_class.graph)));
    if (last_of_stream[stream] != kNone) {
      flat.ops[last_of_stream[stream]].next_in_stream = i;
      ++predecessors;
    }
    last_of_stream[stream] = i;
    op.successors_begin = static_cast<std::uint32_t>(flat.successors.size());
    for (auto [e, end] = boost::out_edges(i, rank_class.graph); e != end; ++e)
      flat.successors.push_back(static_cast<std::uint32_t>(boost::target(*e, rank_class.graph)));
    op.successors_end = static_cast<std::uint32_t>(flat.successors.size());
    while (repeat != rank_class.repeats.end() && i >= repeat->first + repeat->count) ++repeat;
    const bool repeated = repeat != rank_class.repeats.end() && i >= repeat->first &&
                          copy_class(flat.ops[repeat->original + (i - repeat->first)], op);
    if (!repeated) classify_op(graph, c, i, op, plans, compute_times, interference, pipeline);
    if (const TimeNs host_ns = rank_class.op(i).host_ns; host_ns > 0) {
      op.host_work = true;
      flat.host_work.push_back({i, host_ns});
    }
    if (const TimeNs dispatch_ns = rank_class.op(i).dispatch_ns; dispatch_ns > 0 || !flat.issue_at_ns.empty()) {
      flat.issue_at_ns.resize(i + 1, 0);  // the ops before the first with dispatch time are issued at once
      flat.issue_at_ns[i] = (i > 0 ? flat.issue_at_ns[i - 1] : 0) + dispatch_ns;
    }
  }
}

// The class's drift parameters and e_n of each of its groups; the drift off without them.
void set_rank_drift(const RankClass& rank_class, const RankDrift& drift, FlatClass& flat) {
  flat.drift = drift;
  flat.drift_max_of_n.fill(0);
  if (!drift.enabled()) return;
  for (int kind = 0; kind < kGroupKindCount; ++kind)
    flat.drift_max_of_n[kind] = expected_max_of_normals(rank_class.spans[kind].size);
}

// `graph`: every class placed (its ops may be gone). Transfers in the order of their keys.
void pair_pipeline_transfers(const IterationGraph& graph, const Cluster& cluster, PipelineTransfers& pipeline,
                             std::vector<FlatClass>& flat, std::vector<std::optional<PlanTable>>& plans) {
  std::stable_sort(pipeline.begin(), pipeline.end(),
                   [](const PipelineEnd& a, const PipelineEnd& b) { return a.key < b.key; });
  for (std::size_t first = 0, last = 0; first < pipeline.size(); first = last) {
    const auto [sender, receiver, tag] = pipeline[first].key;
    std::array<const PipelineEnd*, 2> ends{};  // the send, the recv
    for (last = first; last < pipeline.size() && pipeline[last].key == pipeline[first].key; ++last) {
      const PipelineEnd& end = pipeline[last];
      if (ends[end.send ? 0 : 1])
        throw std::logic_error(OpRef{graph, end.send ? sender : receiver, end.op}.describe() + ": p2p_tag " +
                               std::to_string(tag) + " used twice");
      ends[end.send ? 0 : 1] = &end;
    }
    if (!ends[0] || !ends[1]) {
      const bool sent = ends[0] != nullptr;
      const OpRef end{graph, sent ? sender : receiver, (sent ? ends[0] : ends[1])->op};
      throw std::logic_error(end.describe() + ": no matching " + (sent ? "recv" : "send") + " on class " +
                             std::to_string(sent ? receiver : sender) + " with p2p_tag " + std::to_string(tag));
    }
    const std::uint32_t send = ends[0]->op;
    const std::uint32_t recv = ends[1]->op;
    const Bytes send_bytes = ends[0]->bytes;
    const Bytes recv_bytes = ends[1]->bytes;
    // Classes of different sizes (asymmetric plans) hold a tensor in different shards: each side's op
    // gives its own bytes per GPU. Classes of equal size must agree.
    const bool same_size = graph.classes[sender].num_ranks == graph.classes[receiver].num_ranks;
    if (send_bytes != recv_bytes && (same_size || send_bytes <= 0 || recv_bytes <= 0))
      throw std::logic_error(OpRef{graph, sender, send}.describe() + " and " + OpRef{graph, receiver, recv}.describe() +
                             " are one transfer but disagree on bytes");
    const bool same_node = cluster.nvlink_domain_of_rank(graph.classes[sender].first_rank) ==
                           cluster.nvlink_domain_of_rank(graph.classes[receiver].first_rank);
    const LinkKind link = same_node ? LinkKind::intra_node : LinkKind::inter_node;
    FlatOp& send_flat = flat[sender].ops[send];
    FlatOp& recv_flat = flat[receiver].ops[recv];
    send_flat.plan = plans[sender]->point_to_point(send_bytes, link, OpRef{graph, sender, send});
    // The receiving GPUs' side of the link must exist too.
    require_links(flat[sender].plans[send_flat.plan], flat[receiver].links, OpRef{graph, receiver, recv});
    if (recv_bytes != send_bytes)
      send_flat.receive_scale = static_cast<double>(recv_bytes) / static_cast<double>(send_bytes);
    send_flat.peer_class = receiver;
    send_flat.peer_op = recv;
    recv_flat.peer_class = sender;
    recv_flat.peer_op = send;
  }
}

}  // namespace

TimeNs FlatClass::host_ns(std::uint32_t op) const {
  const auto work = std::lower_bound(host_work.begin(), host_work.end(), op,
                                     [](const HostWork& w, std::uint32_t i) { return w.op < i; });
  if (work == host_work.end() || work->op != op) throw std::logic_error("an op marked with host work has none");
  return work->host_ns;
}

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
  links.generation = nccl_generation(group.gpu.name);
  links.net_channels = group.nics.count;
  return links;
}

// The node group of class c, which must exist.
const NodeGroup& node_group_of(const IterationGraph& graph, const Cluster& cluster, int c) {
  const int group = graph.classes[c].node_group;
  if (group < 0 || group >= static_cast<int>(cluster.node_groups.size()))
    throw std::logic_error("class " + std::to_string(c) + ": node group " + std::to_string(group) + " does not exist");
  return cluster.node_groups[group];
}

struct Flattener::State {
  FlatIteration flat;
  std::vector<std::optional<PlanTable>> plans;  // per class, from when it is added
  PipelineTransfers pipeline;
  std::optional<InterferenceIndex> interference;  // from when the first class is added
};

Flattener::Flattener(const Cluster& cluster, const Profile& profile, PriceCache* prices, FlatIteration storage)
    : cluster_(cluster), profile_(profile), prices_(prices), state_(std::make_unique<State>()) {
  state_->flat = std::move(storage);
  for (FlatClass& flat : state_->flat.classes) {  // emptied, the arrays' capacity kept
    flat.ops.clear();
    flat.predecessors.clear();
    flat.successors.clear();
    flat.plans.clear();
    flat.host_work.clear();
    flat.issue_at_ns.clear();
  }
}

Flattener::~Flattener() = default;

void Flattener::add(const IterationGraph& graph, int c) {
  FlatIteration& flat = state_->flat;
  if (state_->plans.empty()) {  // the first class added: every class's slot, so that none moves
    state_->interference.emplace(profile_.overlap);
    flat.classes.resize(graph.classes.size());
    state_->plans.resize(graph.classes.size());
  }
  const NodeGroup& group = node_group_of(graph, cluster_, c);
  FlatClass& flat_class = flat.classes[c];
  PlanTable& plans = state_->plans[c].emplace(flat_class, profile_, group.gpu);
  flat_class.links = link_params(group, cluster_.network, profile_);
  flat_class.userbuffers_slowdown = 1.0;
  if (group.gpu.sm_count > kUserbuffersSmCount)
    flat_class.userbuffers_slowdown = double(group.gpu.sm_count) / (group.gpu.sm_count - kUserbuffersSmCount);
  set_rank_drift(graph.classes[c], profile_.kernels_for(group.gpu).rank_drift, flat_class);
  flat_class.ops.reserve(graph.classes[c].size());
  ComputeTimes compute_times(profile_, group.gpu, prices_, step_clock(graph.classes[c], profile_, group.gpu, prices_));
  state_->interference->set_sm_count(group.gpu.sm_count);
  flatten_class(graph, c, flat_class, plans, compute_times, *state_->interference, state_->pipeline);
}

FlatIteration Flattener::finish(const IterationGraph& graph) {
  pair_pipeline_transfers(graph, cluster_, state_->pipeline, state_->flat.classes, state_->plans);
  if (state_->interference) state_->flat.interference = state_->interference->grid();
  return std::move(state_->flat);
}

FlatIteration flatten(const IterationGraph& graph, const Cluster& cluster, const Profile& profile, PriceCache* prices) {
  for (int c = 0; c < static_cast<int>(graph.classes.size()); ++c) node_group_of(graph, cluster, c);  // all first
  Flattener flattener(cluster, profile, prices);
  for (int c = 0; c < static_cast<int>(graph.classes.size()); ++c) flattener.add(graph, c);
  return flattener.finish(graph);
}

}  // namespace twin::sim
