// Pricing for the dynamic programme comes from the event engine: each layer strategy is lowered as a
// one-stage graph of 1 and of 3 identical layers (one micro-batch forward and backward), and the
// difference over 2 is a layer's steady-state time, its ZeRO-3 gathers prefetched behind its neighbour
// as in the real graph; the same with gradient reduction and the optimizer step gives the last
// micro-batch's share. A layer costs (m - 1) x the first + the second (a change of layout between layers
// costs nothing: per_layer.hpp). The DP only chooses: each chosen plan is lowered whole and simulated.
#include "strategies/per_layer/per_layer_search.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "sim/simulate.hpp"
#include "strategies/per_layer/per_layer_dp.hpp"
#include "strategies/per_layer/per_layer_lowering.hpp"
#include "strategies/per_layer/per_layer_plan_file.hpp"
#include "strategies/schedule.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

constexpr int kMemoryBuckets = 512;

struct Pricing {
  const Scenario& scenario;
  const Profile& profile;
  int pp, gpus, stage_micro_batch;

  double simulate_one_stage(const std::vector<LayerStrategy>& layers, bool reduce_and_step) const {
    PerLayerPlan tiny;
    tiny.pipeline_stages = 1;
    tiny.stage_micro_batch = stage_micro_batch;
    tiny.stage_layers = {static_cast<int>(layers.size())};
    tiny.layers = layers;
    IterationGraph graph;
    graph.classes.resize(1);
    RankClass& rc = graph.classes[0];
    rc.num_ranks = gpus;
    per_layer::PerLayerStage stage(scenario, tiny, 0, gpus, rc, false);
    stage.run({{true, 0, 0}, {false, 0, 0}}, reduce_and_step, reduce_and_step);
    return static_cast<double>(simulate_iteration(graph, scenario.cluster, profile).iteration_ns);
  }

  // Per layer: (steady micro-batch time, last micro-batch time with reduction and optimizer share).
  std::pair<double, double> layer_times(const LayerStrategy& s) const {
    const double one = simulate_one_stage({s}, false), three = simulate_one_stage({s, s, s}, false);
    const double one_r = simulate_one_stage({s}, true), three_r = simulate_one_stage({s, s, s}, true);
    return {(three - one) / 2, (three_r - one_r) / 2};
  }
};

bool divides(std::int64_t d, std::int64_t n) { return d > 0 && n % d == 0; }

std::vector<int> stage_micro_batches(const Scenario& scenario, int gpus) {
  std::set<int> values;
  for (int tp : scenario.search.tensor_model_parallel_size)
    for (int mbs : scenario.search.micro_batch_size)
      if (divides(tp, gpus)) {
        const int smb = mbs * (gpus / tp);
        if (divides(smb, scenario.training.global_batch_size)) values.insert(smb);
      }
  return {values.begin(), values.end()};
}

bool is_uniform_megatron(const PerLayerPlan& plan, const Scenario& scenario) {
  for (const LayerStrategy& s : plan.layers)
    if (!(s == plan.layers.front())) return false;
  if (plan.layers.front().layout.ulysses) return false;
  Strategy st;
  st.pipeline_model_parallel_size = plan.pipeline_stages;
  for (int stage = 0; stage < plan.pipeline_stages; ++stage)
    if (plan.stage_layers[stage] != layers_in_virtual_stage(scenario.model, st, stage)) return false;
  return true;
}

// The op-count bound (strategies/validity.hpp) on a plan of `micro_batches`, its layers at their most ops (full
// recompute): checked before a plan's layers are priced or the plan lowered.
std::optional<std::string> too_many_ops(const Scenario& scenario, int micro_batches) {
  Strategy whole;
  whole.num_micro_batches = micro_batches;
  whole.recompute = Recompute::full;
  return too_many_ops_reason(scenario, whole);
}

}  // namespace

std::vector<LayerStrategy> layer_strategy_space(const Scenario& scenario, int pp, int smb) {
  const ModelConfig& m = scenario.model;
  const SearchSpace& space = scenario.search;
  const int gpus = scenario.cluster.total_gpus() / pp;
  std::vector<LayerStrategy> out;
  for (bool ulysses : {false, true})
    for (int t : space.tensor_model_parallel_size) {
      if (!divides(t, gpus) || !divides(gpus / t, smb) || (ulysses && t == 1)) continue;
      if (!divides(t, m.num_attention_heads) || !divides(t, m.num_query_groups) || !divides(t, m.ffn_hidden_size))
        continue;
      if (!divides(t, scenario.training.seq_length)) continue;
      const LayerLayout layout{t, ulysses};
      for (int zero : space.zero_stage) {
        if (zero > 0 && data_group_of(layout, gpus) == 1) continue;
        for (Recompute r : space.recompute) out.push_back({layout, zero, r});
      }
    }
  return out;
}

Candidate evaluate_per_layer(const Scenario& scenario, const Profile& profile, const PerLayerPlan& plan,
                             bool record_op_timings, IterationGraph* graph_out) {
  Candidate c;
  c.strategy = home_strategy(scenario, plan);
  c.memory = estimate_per_layer_memory(scenario, plan);
  c.feasible = true;
  IterationGraph graph = lower_per_layer_plan(scenario, plan);
  c.result = simulate_iteration(graph, scenario.cluster, profile, SimOptions{record_op_timings});
  c.throughput = per_layer_throughput(scenario, plan, c.strategy, to_seconds(c.result.iteration_ns));
  c.plan = std::make_shared<PerLayerPlan>(plan);
  if (graph_out) *graph_out = std::move(graph);
  return c;
}

Candidate PerLayerPlan::evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                                 IterationGraph* graph) const {
  return evaluate_per_layer(scenario, profile, *this, record_op_timings, graph);
}

namespace {

// A pinned plan alone, refused where it does not fit.
Candidate pinned_candidate(const Scenario& scenario, const Profile& profile) {
  const PerLayerPlan plan = pinned_per_layer_plan(scenario);
  const MemoryEstimate memory = estimate_per_layer_memory(scenario, plan);
  const std::string reason =
      too_many_ops(scenario, plan.num_micro_batches)
          .value_or(out_of_memory_reason(memory, scenario.cluster.node_groups.front().gpu.memory_GiB));
  if (reason.empty()) return evaluate_per_layer(scenario, profile, plan, false);
  Candidate c;
  c.strategy = home_strategy(scenario, plan);
  c.memory = memory;
  c.plan = std::make_shared<PerLayerPlan>(plan);
  c.infeasible_reason = reason;
  return c;
}

// Whether the search offers per-layer plans: asked for, nothing pinned, a dense model with standard attention on one
// kind of node, and context parallelism 1 among the sizes searched.
bool searches_per_layer(const Scenario& scenario) {
  const SearchSpace& space = scenario.search;
  const ModelConfig& m = scenario.model;
  if (!space.per_layer || scenario.strategy || scenario.hot_switch_plan || m.is_moe() || m.mla.enabled() ||
      m.mtp_num_layers > 0 || scenario.cluster.node_groups.size() != 1)
    return false;
  return std::find(space.context_parallel_size.begin(), space.context_parallel_size.end(), 1) !=
         space.context_parallel_size.end();
}

// What a stage's layer choices are priced and bounded by: the layers' times, the bytes every stage holds whatever
// its layers, and per stage the leanest layer's bytes at that stage's depth of micro-batches in flight.
struct StageBounds {
  std::vector<std::pair<double, double>> times;  // per option: Pricing::layer_times
  std::vector<double> fixed, leanest_layer;
  std::vector<int> in_flight;
};

StageBounds stage_bounds(const Scenario& scenario, const Profile& profile, const PerLayerPlan& plan, int gpus,
                         const std::vector<LayerStrategy>& options) {
  const int pp = plan.pipeline_stages, smb = plan.stage_micro_batch;
  const auto orders = pipeline_schedule(plan.schedule, pp, plan.num_micro_batches, 1);
  const Pricing pricing{scenario, profile, pp, gpus, smb};
  StageBounds bounds;
  for (const LayerStrategy& s : options) bounds.times.push_back(pricing.layer_times(s));
  // Stages balanced by memory: the leanest layer strategy's bytes per layer at each stage's depth.
  bounds.fixed.resize(pp);
  bounds.leanest_layer.resize(pp);
  bounds.in_flight.resize(pp);
  for (int stage = 0; stage < pp; ++stage) {
    bounds.in_flight[stage] = peak_in_flight_passes(orders[stage]);
    bounds.fixed[stage] = stage_fixed_bytes_bound(scenario, options, stage, pp, gpus, smb, bounds.in_flight[stage]);
    bounds.leanest_layer[stage] = scenario.cluster.node_groups.front().gpu.memory_GiB * kGiB;
    for (const LayerStrategy& s : options) {
      const LayerMemory lm = layer_memory(scenario, s, 0, gpus, smb);
      bounds.leanest_layer[stage] =
          std::min(bounds.leanest_layer[stage], lm.states() + lm.activations_per_pass * bounds.in_flight[stage]);
    }
  }
  return bounds;
}

// The layers of `plan` over `split` as the dynamic programme chooses them per stage, and the slowest stage's time;
// nullopt where a stage's layers do not fit.
std::optional<std::pair<PerLayerPlan, double>> choose_layers(const Scenario& scenario, const PerLayerPlan& plan,
                                                            int gpus, const std::vector<LayerStrategy>& options,
                                                            const StageBounds& bounds, const std::vector<int>& split) {
  const double capacity = scenario.cluster.node_groups.front().gpu.memory_GiB * kGiB;
  PerLayerPlan chosen = plan;
  chosen.stage_layers = split;
  double slowest = 0;
  for (int stage = 0; stage < plan.pipeline_stages; ++stage) {
    DpProblem problem;
    problem.layers = split[stage];
    problem.budget_bytes = capacity - bounds.fixed[stage];
    problem.memory_buckets = kMemoryBuckets;
    for (std::size_t k = 0; k < options.size(); ++k) {
      const LayerMemory lm = layer_memory(scenario, options[k], 0, gpus, plan.stage_micro_batch);
      problem.options.push_back({(plan.num_micro_batches - 1) * bounds.times[k].first + bounds.times[k].second,
                                 lm.states() + lm.activations_per_pass * bounds.in_flight[stage]});
    }
    const DpSolution solution = choose_layer_options(problem);
    if (!solution.feasible) return std::nullopt;
    for (int choice : solution.choice) chosen.layers.push_back(options[choice]);
    slowest = std::max(slowest, solution.time);
  }
  return std::make_pair(std::move(chosen), slowest);
}

// The cheapest plan of `plan`'s stages, schedule and micro-batches over the memory-balanced and the even split of
// the layers (nullopt where no layer strategy applies, the pipeline lacks micro-batches or none fits).
std::optional<PerLayerPlan> cheapest_plan(const Scenario& scenario, const Profile& profile, const PerLayerPlan& plan,
                                          int gpus) {
  const int pp = plan.pipeline_stages, micro_batches = plan.num_micro_batches;
  const std::vector<LayerStrategy> options = layer_strategy_space(scenario, pp, plan.stage_micro_batch);
  if (options.empty() || (pp > 1 && micro_batches < pp) || too_many_ops(scenario, micro_batches)) return std::nullopt;
  const StageBounds bounds = stage_bounds(scenario, profile, plan, gpus, options);
  Strategy even;
  even.pipeline_model_parallel_size = pp;
  std::vector<int> even_split(pp);
  for (int stage = 0; stage < pp; ++stage) even_split[stage] = layers_in_virtual_stage(scenario.model, even, stage);
  std::vector<std::vector<int>> splits = {
      memory_balanced_split(scenario.model.num_layers, bounds.fixed, bounds.leanest_layer)};
  if (splits.front() != even_split) splits.push_back(even_split);

  double best_time = 0;
  std::optional<PerLayerPlan> best;
  for (const std::vector<int>& split : splits) {
    auto chosen = choose_layers(scenario, plan, gpus, options, bounds, split);
    if (!chosen) continue;
    // Pipeline estimate: the slowest stage's work plus (pp - 1) of its micro-batches of fill and drain.
    const double estimate = chosen->second * (micro_batches + pp - 1) / micro_batches;
    if (!best || estimate < best_time) best_time = estimate, best = std::move(chosen->first);
  }
  return best;
}

}  // namespace

std::vector<Candidate> per_layer_candidates(const Scenario& scenario, const Profile& profile) {
  if (scenario.per_layer_plan) return {pinned_candidate(scenario, profile)};
  std::vector<Candidate> out;
  if (!searches_per_layer(scenario)) return out;
  const SearchSpace& space = scenario.search;
  const double capacity = scenario.cluster.node_groups.front().gpu.memory_GiB * kGiB;
  std::set<std::string> seen;
  for (int pp : space.pipeline_model_parallel_size) {
    const int world = scenario.cluster.total_gpus();
    if (!divides(pp, world) || pp > scenario.model.num_layers) continue;
    const int gpus = world / pp;
    std::vector<Schedule> schedules;
    for (Schedule s : space.schedule)
      if ((s == Schedule::one_f_one_b || s == Schedule::gpipe) && (pp > 1 || schedules.empty())) schedules.push_back(s);
    for (Schedule schedule : schedules)
      for (int smb : stage_micro_batches(scenario, gpus)) {
        PerLayerPlan plan;
        plan.pipeline_stages = pp;
        plan.stage_micro_batch = smb;
        plan.num_micro_batches = static_cast<int>(scenario.training.global_batch_size / smb);
        plan.schedule = schedule;
        const std::optional<PerLayerPlan> best = cheapest_plan(scenario, profile, plan, gpus);
        if (!best || is_uniform_megatron(*best, scenario) || !seen.insert(best->key()).second) continue;
        const MemoryEstimate memory = estimate_per_layer_memory(scenario, *best);
        if (!out_of_memory_reason(memory, capacity / kGiB).empty()) continue;  // the DP's bound is conservative
        out.push_back(evaluate_per_layer(scenario, profile, *best, false));
      }
  }
  return out;
}

}  // namespace twin
