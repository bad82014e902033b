// compute_busy (flat_graph.hpp): each class's compute priced one op after another, with the communication its
// compute stream waits through, for the search's lower bound.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "sim/flat_graph.hpp"
#include "sim/flat_pricing.hpp"
#include "sim/step_clock.hpp"

namespace twin::sim {

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

ComputeBusy compute_busy_of(const IterationGraph& graph, int c, const Cluster& cluster, const Profile& profile,
                            PriceCache* prices, bool count_waits) {
  const RankClass& rank_class = graph.classes[c];
  if (rank_class.node_group < 0 || rank_class.node_group >= static_cast<int>(cluster.node_groups.size()))
    throw std::logic_error("node group " + std::to_string(rank_class.node_group) + " does not exist");
  const NodeGroup& group = cluster.node_groups[rank_class.node_group];
  ComputeTimes compute_times(profile, group.gpu, prices, step_clock(rank_class, profile, group.gpu, prices));
  FlatClass plans_only;  // the plans of the communication waited through, as flattening makes them
  plans_only.links = link_params(group, cluster.network, profile);
  PlanTable plans(plans_only, profile, group.gpu);
  bool one_compute_stream = count_waits;
  for (OpIndex i = 0; i < rank_class.size(); ++i)
    if (rank_class.op(i).stream == Stream::compute2) one_compute_stream = false;
  ComputeBusy total;
  total.stage = rank_class.stage;
  OpIndex previous = 0;
  bool any_previous = false;
  // Each compute op's price, which a repeated op takes from its original (RankClass::repeats) without pricing it.
  thread_local std::vector<TimeNs> price_of;
  price_of.resize(rank_class.size());
  auto repeat = rank_class.repeats.begin();
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    const Op& op = rank_class.op(i);
    if (op.is_communication()) continue;
    while (repeat != rank_class.repeats.end() && i >= repeat->first + repeat->count) ++repeat;
    const bool repeated = repeat != rank_class.repeats.end() && i >= repeat->first;
    price_of[i] = repeated ? price_of[repeat->original + (i - repeat->first)] : compute_times(op);
    TimeNs ns = price_of[i];
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
  return total;
}

std::vector<ComputeBusy> compute_busy(const IterationGraph& graph, const Cluster& cluster, const Profile& profile,
                                      PriceCache* prices) {
  std::vector<ComputeBusy> busy;
  busy.reserve(graph.classes.size());
  for (int c = 0; c < static_cast<int>(graph.classes.size()); ++c)
    busy.push_back(compute_busy_of(graph, c, cluster, profile, prices));
  return busy;
}

}  // namespace twin::sim
