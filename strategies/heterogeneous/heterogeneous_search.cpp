// The heterogeneous family's search: enumerate TP sizes per GPU kind, pipeline layouts (split by kind or
// mixed), micro-batch sizes, recompute and ZeRO-1; for each, assign layers and micro-batches from priced
// unit costs and memory bounds, estimate the iteration (slowest pipeline's fill + steady state + drain),
// and simulate the best estimates in the event engine. Deterministic: plans are ranked by (estimate,
// key) and simulated into fixed slots whatever the number of threads.
#include "strategies/heterogeneous/heterogeneous_search.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/parallel_for.hpp"
#include "sim/collectives.hpp"
#include "sim/flat_graph.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

// Beyond this many ways to give each GPU kind a TP size, the heterogeneous search would take minutes.
constexpr double kMaxTpAssignments = 4096;

double priced_ns(const Profile& profile, const NodeGroup& group, const sim::LinkParams& links, const RankClass& rc,
                 int tp) {
  double ns = 0;
  const GroupSpan span{tp, tp, 1};
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (!op.is_communication()) ns += static_cast<double>(compute_time_ns(profile, group.gpu, op));
    else if (op.group == GroupKind::tensor && tp > 1)
      ns += sim::isolated_time_ns(sim::tune_collective(op.kind, op.bytes, span, links), static_cast<double>(op.bytes), links);
  }
  return ns;
}

}  // namespace

StageCosts stage_costs(const Scenario& scenario, const Profile& profile, int node_group, int tp, const Strategy& shared,
                       int micro_batch_size) {
  AsymmetricPipeline one{micro_batch_size, 1, {AsymmetricStage{{0}, tp, scenario.model.num_layers}}};
  const Strategy s = stage_strategy(shared, one, 0);
  const lowering::RankShapes shapes = lowering::rank_shapes(scenario, s);
  const NodeGroup& group = scenario.cluster.node_groups[node_group];
  const sim::LinkParams links = sim::link_params(group, scenario.cluster.network, profile);
  const auto cost_of = [&](auto emit) {
    RankClass rc;
    lowering::Emitter e(rc, shapes);
    e.begin_pass(Phase::forward, 0, 0);
    emit(e, true);
    e.begin_pass(Phase::backward, 0, 0);
    e.chain = lowering::kNoOp;
    emit(e, false);
    return priced_ns(profile, group, links, rc, tp);
  };
  StageCosts costs;
  costs.layer_ns = cost_of([&](lowering::Emitter& e, bool fwd) {
    fwd ? lowering::emit_layer_forward(e, scenario.model, 0) : lowering::emit_layer_backward(e, scenario.model, 0);
  });
  costs.embedding_ns = cost_of([](lowering::Emitter& e, bool fwd) {
    fwd ? lowering::emit_embedding_forward(e) : lowering::emit_embedding_backward(e);
  });
  costs.head_ns = cost_of([](lowering::Emitter& e, bool fwd) {
    fwd ? lowering::emit_head_forward(e) : lowering::emit_head_backward(e);
  });
  return costs;
}

namespace {

struct Estimated {
  double iteration_ns = 0;
  std::string key;
  Strategy shared;
  std::vector<AsymmetricPipeline> plan;
};

std::vector<int> powers_of_two_up_to(int n) {
  std::vector<int> out;
  for (int v = 1; v <= n; v *= 2) out.push_back(v);
  return out;
}

class PlanBuilder {
 public:
  PlanBuilder(const Scenario& scenario, const Profile& profile) : scenario_(scenario), profile_(profile) {}

  // Layers and micro-batches for pipelines of TP groups; nullopt when memory or batch cannot be met.
  std::optional<Estimated> build(const std::vector<std::vector<TpGroup>>& layout, const Strategy& shared, int mbs) {
    const int pipelines = static_cast<int>(layout.size());
    const std::int64_t global = scenario_.training.global_batch_size;
    if (global % mbs != 0 || asymmetric_too_many_ops_reason(scenario_, shared, global / mbs, pipelines))
      return std::nullopt;
    // Every pipeline takes at least one micro-batch and every stage at least one layer.
    if (pipelines > global / mbs) return std::nullopt;
    for (const std::vector<TpGroup>& stages : layout)
      if (static_cast<int>(stages.size()) > scenario_.model.num_layers) return std::nullopt;
    Estimated out;
    out.shared = shared;
    std::vector<double> micro_batch_ns;
    std::vector<int> depths;
    for (const std::vector<TpGroup>& stages : layout) {
      const int depth = static_cast<int>(stages.size());
      std::vector<double> layer_ns, extra_ns;
      std::vector<int> max_layers;
      AsymmetricPipeline pipeline{mbs, depth, {}};
      for (int s = 0; s < depth; ++s) {
        const TpGroup& t = stages[s];
        const int tp = static_cast<int>(t.devices.size());
        const StageCosts& c = costs(t.node_group, tp, shared, mbs);
        layer_ns.push_back(c.layer_ns);
        extra_ns.push_back((s == 0 ? c.embedding_ns : 0.0) + (s == depth - 1 ? c.head_ns : 0.0));
        max_layers.push_back(max_layers_of(t.node_group, tp, s, depth, shared, mbs, pipelines));
        pipeline.stages.push_back(AsymmetricStage{t.devices, tp, 0});
      }
      const std::vector<int> layers = assign_layers(scenario_.model.num_layers, layer_ns, extra_ns, max_layers);
      if (layers.empty()) return std::nullopt;
      double slowest = 0;
      for (int s = 0; s < depth; ++s) {
        pipeline.stages[s].num_layers = layers[s];
        slowest = std::max(slowest, layers[s] * layer_ns[s] + extra_ns[s]);
      }
      micro_batch_ns.push_back(slowest);
      depths.push_back(depth);
      out.plan.push_back(std::move(pipeline));
    }
    const std::vector<int> counts = assign_micro_batches(static_cast<int>(global / mbs), micro_batch_ns, depths);
    if (counts.empty()) return std::nullopt;
    for (int p = 0; p < pipelines; ++p) {
      out.plan[p].num_micro_batches = counts[p];
      out.iteration_ns = std::max(out.iteration_ns, (counts[p] + depths[p] - 1) * micro_batch_ns[p]);
    }
    out.key = asymmetric_plan_key(shared, out.plan);
    return out;
  }

 private:
  const StageCosts& costs(int node_group, int tp, const Strategy& shared, int mbs) {
    const auto key = std::make_tuple(node_group, tp, mbs, static_cast<int>(shared.recompute), shared.sequence_parallel);
    auto it = costs_.find(key);
    if (it == costs_.end()) it = costs_.emplace(key, stage_costs(scenario_, profile_, node_group, tp, shared, mbs)).first;
    return it->second;
  }

  // Memory is affine in the layer count: measure at one and two layers and solve for the capacity.
  // The stage is assumed to hold its most micro-batches in flight (as many as the stages from it on).
  int max_layers_of(int node_group, int tp, int stage, int depth, const Strategy& shared, int mbs, int pipelines) {
    const auto key = std::make_tuple(node_group, tp, stage, depth, mbs, static_cast<int>(shared.recompute),
                                     shared.sequence_parallel, shared.zero_stage, pipelines);
    auto it = max_layers_.find(key);
    if (it != max_layers_.end()) return it->second;
    AsymmetricPipeline probe{mbs, depth, {}};
    for (int s = 0; s < depth; ++s) probe.stages.push_back(AsymmetricStage{{0}, s == stage ? tp : 1, 1});
    const double one = static_cast<double>(asymmetric_stage_memory(scenario_, shared, probe, stage, pipelines).total());
    for (AsymmetricStage& s : probe.stages) s.num_layers = 2;
    const double two = static_cast<double>(asymmetric_stage_memory(scenario_, shared, probe, stage, pipelines).total());
    const double capacity = scenario_.cluster.node_groups[node_group].gpu.memory_GiB * kGiB;
    int most = 0;
    if (one <= capacity) most = two > one ? 1 + static_cast<int>((capacity - one) / (two - one)) : scenario_.model.num_layers;
    most = std::min(most, scenario_.model.num_layers);
    max_layers_.emplace(key, most);
    return most;
  }

  const Scenario& scenario_;
  const Profile& profile_;
  std::map<std::tuple<int, int, int, int, bool>, StageCosts> costs_;
  std::map<std::tuple<int, int, int, int, int, int, bool, int, int>, int> max_layers_;
};

// The kind of each node group: a GPU model in nodes of one size. Node groups of one kind take one TP size
// and one split into pipelines, so the choices grow with the kinds of GPU, not with the node groups.
std::vector<int> kind_of_each_group(const Cluster& cluster, std::vector<int>& first_group_of_kind) {
  std::vector<int> kind_of_group;
  for (const NodeGroup& group : cluster.node_groups) {
    const auto same = std::find_if(first_group_of_kind.begin(), first_group_of_kind.end(), [&](int first) {
      return cluster.node_groups[first].gpu.name == group.gpu.name &&
             cluster.node_groups[first].gpus_per_node == group.gpus_per_node;
    });
    kind_of_group.push_back(static_cast<int>(same - first_group_of_kind.begin()));
    if (same == first_group_of_kind.end()) first_group_of_kind.push_back(static_cast<int>(kind_of_group.size()) - 1);
  }
  return kind_of_group;
}

// What any plan can hold: each pipeline at least one micro-batch (of the smallest size), each stage at least one
// layer. Layouts beyond are never built: on a cluster of many nodes they would be gigabytes of TP groups.
struct LayoutBounds {
  std::int64_t max_pipelines = 0;
  std::int64_t max_stages = 0;
};

// Every layout of TP groups into pipelines the search tries for one choice of TP size per kind, within `bounds`.
std::vector<std::vector<std::vector<TpGroup>>> layouts(const Cluster& cluster, const std::vector<TpGroup>& groups,
                                                       const std::vector<int>& kind_of_group, int kinds,
                                                       const LayoutBounds& bounds) {
  std::vector<std::vector<std::vector<TpGroup>>> out;
  const int node_groups = static_cast<int>(cluster.node_groups.size());
  std::vector<int> groups_of_node_group(node_groups, 0);
  for (const TpGroup& t : groups) ++groups_of_node_group[t.node_group];
  const int fewest = *std::min_element(groups_of_node_group.begin(), groups_of_node_group.end());
  const auto total = static_cast<std::int64_t>(groups.size());
  for (int p : powers_of_two_up_to(fewest))
    if (p <= bounds.max_pipelines && total <= p * bounds.max_stages)
      if (auto layout = mixed_pipelines(cluster, groups, p); !layout.empty()) out.push_back(std::move(layout));
  // Split: every combination of pipelines per kind (powers of two dividing the TP groups of each of its
  // node groups, at most the plan's most pipelines).
  std::vector<int> fewest_of_kind(kinds, std::numeric_limits<int>::max());
  for (int g = 0; g < node_groups; ++g)
    fewest_of_kind[kind_of_group[g]] = static_cast<int>(std::min<std::int64_t>(
        {fewest_of_kind[kind_of_group[g]], groups_of_node_group[g], bounds.max_pipelines}));
  std::vector<int> counts(kinds, 1);
  while (true) {
    std::vector<int> pipelines_of_group(node_groups);
    std::int64_t pipelines = 0;
    bool within = true;
    for (int g = 0; g < node_groups; ++g) {
      pipelines_of_group[g] = counts[kind_of_group[g]];
      pipelines += pipelines_of_group[g];
      within = within && groups_of_node_group[g] <= pipelines_of_group[g] * bounds.max_stages;
    }
    if (within && pipelines <= bounds.max_pipelines)
      if (auto layout = split_pipelines(cluster, groups, pipelines_of_group); !layout.empty())
        out.push_back(std::move(layout));
    int k = 0;
    while (k < kinds && (counts[k] *= 2) > fewest_of_kind[k]) counts[k++] = 1;
    if (k == kinds) break;
  }
  return out;
}

// The most pipelines a plan of `micro_batches` can have: each at least one micro-batch, and the gradient rings
// over them within the op-count bound (asymmetric_op_count grows with the square of the pipelines).
std::int64_t most_pipelines(const Scenario& scenario, std::int64_t micro_batches) {
  std::int64_t fits = 1, too_many = micro_batches + 1;  // binary search: fits is within the bound, too_many is not
  while (too_many - fits > 1) {
    const std::int64_t middle = fits + (too_many - fits) / 2;
    if (asymmetric_too_many_ops_reason(scenario, Strategy{}, micro_batches, middle)) too_many = middle;
    else fits = middle;
  }
  return fits;
}

// The search's micro-batch sizes that divide the batch into few enough micro-batches for one graph
// (strategies/validity.hpp's bound, at one pipeline).
std::vector<int> graphable_micro_batch_sizes(const Scenario& scenario) {
  const std::int64_t global = scenario.training.global_batch_size;
  std::vector<int> sizes;
  for (int mbs : scenario.search.micro_batch_size)
    if (global % mbs == 0 && !asymmetric_too_many_ops_reason(scenario, Strategy{}, global / mbs, 1)) sizes.push_back(mbs);
  return sizes;
}

// The next choice of one TP size per kind (an odometer over tp_options); false after the last.
bool next_tp_choice(std::vector<std::size_t>& choice, const std::vector<std::vector<int>>& tp_options) {
  for (std::size_t k = 0; k < choice.size(); ++k) {
    if (++choice[k] < tp_options[k].size()) return true;
    choice[k] = 0;
  }
  return false;
}

// TP sizes per GPU kind: the search space's, inside a node, dividing heads, query groups and FFN width. Refuses
// more assignments of them to the kinds than kMaxTpAssignments.
std::vector<std::vector<int>> tp_sizes_per_kind(const Scenario& scenario, const std::vector<int>& first_group_of_kind) {
  const Cluster& cluster = scenario.cluster;
  const ModelConfig& model = scenario.model;
  const int kinds = static_cast<int>(first_group_of_kind.size());
  std::vector<std::vector<int>> tp_options(kinds);
  for (int k = 0; k < kinds; ++k)
    for (int tp : scenario.search.tensor_model_parallel_size)
      if (cluster.node_groups[first_group_of_kind[k]].gpus_per_node % tp == 0 && model.num_attention_heads % tp == 0 &&
          model.num_query_groups % tp == 0 && model.ffn_hidden_size % tp == 0)
        tp_options[k].push_back(tp);
  double assignments = 1;
  for (const auto& options : tp_options) assignments *= static_cast<double>(std::max<std::size_t>(1, options.size()));
  if (assignments > kMaxTpAssignments)
    throw InputError(scenario.source, "/search/tensor_model_parallel_size",
                     fmt::format("at most {} assignments of TP sizes to the cluster's {} GPU kinds for heterogeneous "
                                 "plans, got {:.0f}: list fewer TP sizes",
                                 kMaxTpAssignments, kinds, assignments));
  return tp_options;
}

// Every plan the search tries, estimated (deduplicated by key): each choice of TP size per kind, each layout of its
// TP groups into pipelines, each micro-batch size, recompute and ZeRO stage (0 or 1; 0 with one pipeline).
std::vector<Estimated> estimate_plans(const Scenario& scenario, const Profile& profile,
                                      const std::vector<int>& kind_of_group,
                                      const std::vector<std::vector<int>>& tp_options,
                                      const std::vector<int>& micro_batch_sizes) {
  const Cluster& cluster = scenario.cluster;
  const SearchSpace& space = scenario.search;
  const int groups_count = static_cast<int>(cluster.node_groups.size()), kinds = static_cast<int>(tp_options.size());
  std::vector<int> zero_stages;
  for (int z : space.zero_stage)
    if (z <= 1) zero_stages.push_back(z);
  if (zero_stages.empty()) zero_stages.push_back(0);
  const bool sp = std::find(space.sequence_parallel.begin(), space.sequence_parallel.end(), true) !=
                  space.sequence_parallel.end();
  LayoutBounds bounds;
  bounds.max_pipelines = most_pipelines(scenario, scenario.training.global_batch_size /
                                                      *std::min_element(micro_batch_sizes.begin(), micro_batch_sizes.end()));
  bounds.max_stages = scenario.model.num_layers;
  PlanBuilder builder(scenario, profile);
  std::vector<Estimated> estimates;
  std::set<std::string> seen;
  std::vector<std::size_t> choice(kinds, 0);
  do {
    std::vector<int> tp_of_group(groups_count);
    std::int64_t tp_groups = 0;
    for (int g = 0; g < groups_count; ++g) {
      tp_of_group[g] = tp_options[kind_of_group[g]][choice[kind_of_group[g]]];
      tp_groups += std::int64_t{cluster.node_groups[g].count} * cluster.node_groups[g].gpus_per_node / tp_of_group[g];
    }
    // More TP groups than any plan has stages: no layout, and the groups themselves are not built.
    if (tp_groups > bounds.max_pipelines * bounds.max_stages) continue;
    const std::vector<TpGroup> groups = tensor_parallel_groups(cluster, tp_of_group);
    for (const auto& layout : layouts(cluster, groups, kind_of_group, kinds, bounds))
      for (int mbs : micro_batch_sizes)
        for (Recompute recompute : space.recompute)
          for (int zero : zero_stages) {
            Strategy shared;
            shared.sequence_parallel = sp;
            shared.recompute = recompute;
            shared.zero_stage = layout.size() > 1 ? zero : 0;
            shared.schedule = Schedule::one_f_one_b;
            if (auto estimate = builder.build(layout, shared, mbs); estimate && seen.insert(estimate->key).second)
              estimates.push_back(std::move(*estimate));
          }
  } while (next_tp_choice(choice, tp_options));
  return estimates;
}

}  // namespace

std::vector<Candidate> heterogeneous_candidates(const Scenario& scenario, const Profile& profile, int jobs,
                                                int simulate_top) {
  const ModelConfig& model = scenario.model;
  // Models and recipes an asymmetric plan does not take: a pinned one is refused with experts, MTP, a table tied over
  // stages (core/scenario_pipelines.cpp) and FP8 (core/scenario_fp8.cpp: its lowering prices 16-bit linears), so a
  // searched one's plan file would not read back; and MLA.
  if (model.is_moe() || model.mla.enabled() || model.mtp_num_layers > 0 || !model.untie_embeddings_and_output_weights ||
      scenario.training.fp8)
    return {};
  std::vector<int> first_group_of_kind;
  const std::vector<int> kind_of_group = kind_of_each_group(scenario.cluster, first_group_of_kind);
  const std::vector<std::vector<int>> tp_options = tp_sizes_per_kind(scenario, first_group_of_kind);
  for (const auto& options : tp_options)
    if (options.empty()) return {};
  // Checked before any layout is built: a cluster of many nodes has layouts of gigabytes.
  const std::vector<int> micro_batch_sizes = graphable_micro_batch_sizes(scenario);
  if (micro_batch_sizes.empty()) return {};
  std::vector<Estimated> estimates = estimate_plans(scenario, profile, kind_of_group, tp_options, micro_batch_sizes);
  std::sort(estimates.begin(), estimates.end(), [](const Estimated& a, const Estimated& b) {
    return a.iteration_ns != b.iteration_ns ? a.iteration_ns < b.iteration_ns : a.key < b.key;
  });
  if (static_cast<int>(estimates.size()) > simulate_top) estimates.resize(static_cast<std::size_t>(simulate_top));

  // Each plan's whole graph is in memory while it is simulated (about 0.5 KB an op): together, the plans simulated at
  // once stay within one bound's worth of ops.
  std::int64_t largest_ops = 1;
  for (const Estimated& e : estimates)
    largest_ops = std::max(largest_ops, asymmetric_op_count(scenario, e.shared, scenario.training.global_batch_size /
                                                                                    e.plan.front().micro_batch_size,
                                                            static_cast<std::int64_t>(e.plan.size())));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = static_cast<int>(
      std::clamp<std::int64_t>(kMaxOpsPerCandidate / largest_ops, 1, jobs > 0 ? jobs : cores));
  std::vector<Candidate> out(estimates.size());
  parallel_for(estimates.size(), threads, [&](std::size_t k) {
    out[k] = evaluate_asymmetric_plan(scenario, profile, estimates[k].shared, estimates[k].plan, false);
  });
  return out;
}

std::vector<Candidate> heterogeneous_family_candidates(const Scenario& scenario, const Profile& profile, int jobs) {
  if (!scenario.pipelines.empty())
    return {evaluate_asymmetric_plan(scenario, profile, *scenario.strategy, scenario.pipelines, false)};
  if (scenario.strategy || scenario.pins_family_plan() || scenario.cluster.is_homogeneous()) return {};
  return heterogeneous_candidates(scenario, profile, jobs);
}

}  // namespace twin
