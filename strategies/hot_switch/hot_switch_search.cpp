// The hot-switching search: simulate every feasible (bucket, strategy) phase once (in parallel, results
// in fixed slots so any --jobs gives the same bytes), choose boundaries per home strategy with a dynamic
// program, and simulate the winners whole (switch transfers and per-layer waits included).
#include "strategies/hot_switch/hot_switch_search.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/parallel_for.hpp"
#include "sim/simulate.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"
#include "strategies/hot_switch/hot_switch_plan_file.hpp"
#include "strategies/memory.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

// The uniform strategies a phase may run: one stage layout per pipeline rank (no virtual stages, no
// double strand, no experts), deduplicated after normalisation.
std::vector<Strategy> phase_strategies(const Scenario& scenario) {
  std::vector<Strategy> out;
  std::set<std::string> seen;
  const int world = scenario.cluster.total_gpus();
  for (const Candidate& c : enumerate_candidates(scenario)) {
    Strategy s = c.strategy;
    if (s.pipeline_model_parallel_size == 1) s.schedule = Schedule::one_f_one_b;
    if (s.tensor_model_parallel_size == 1) s.sequence_parallel = false;
    // Whole experts only: the re-sharding moves them with the replicated part (hot_switch_resharding.cpp).
    if (s.expert_model_parallel_size != 1 || s.expert_tensor_parallel_size != 1 ||
        s.virtual_pipeline_model_parallel_size != 1 ||
        s.schedule == Schedule::interleaved_1f1b || s.schedule == Schedule::double_strand)
      continue;
    if (s.model_parallel_size() <= 0 || world % s.model_parallel_size() != 0) continue;
    s.data_parallel_size = world / s.model_parallel_size();
    s.num_micro_batches = 1;
    if (seen.insert(s.key()).second) out.push_back(s);
  }
  return out;
}

struct PhaseSlot {
  bool valid = false;
  HotSwitchPhase phase;
  MemoryEstimate memory;
  Bytes non_optimizer_bytes = 0;   // the worst stage without optimizer states
  Bytes optimizer_bytes = 0;       // the most optimizer states a GPU holds in this layout
  double time_ns = kNoPhase;       // simulated, optimizer step excluded
};

PhaseSlot prepare_phase(const Scenario& scenario, const std::vector<SeqLengthCount>& batch, std::int64_t from_length,
                        std::int64_t to_length, Strategy strategy) {
  PhaseSlot slot;
  slot.phase.workload = pack_range(batch, from_length, to_length);
  if (slot.phase.workload.empty()) return slot;
  slot.phase.packs = padded_packs(slot.phase.workload, strategy);
  const Scenario lowered_for = phase_scenario(scenario, slot.phase.workload, slot.phase.packs);
  if (complete_strategy(lowered_for, strategy) || invalid_reason(lowered_for, strategy)) return slot;
  slot.phase.strategy = strategy;
  slot.memory = estimate_memory(lowered_for, strategy);
  for (const MemoryBreakdown& stage : slot.memory.per_stage) {
    slot.non_optimizer_bytes = std::max(slot.non_optimizer_bytes, stage.total() - stage.optimizer_states);
    slot.optimizer_bytes = std::max(slot.optimizer_bytes, stage.optimizer_states);
  }
  slot.valid = true;
  return slot;
}

// The plan's memory per stage index: each phase's estimate with the optimizer states of home's layout (the last).
MemoryEstimate plan_memory(const std::vector<const MemoryEstimate*>& phases) {
  Bytes home_optimizer = 0;
  for (const MemoryBreakdown& stage : phases.back()->per_stage)
    home_optimizer = std::max(home_optimizer, stage.optimizer_states);
  MemoryEstimate memory;
  for (const MemoryEstimate* phase : phases) {
    for (std::size_t stage = 0; stage < phase->per_stage.size(); ++stage) {
      MemoryBreakdown b = phase->per_stage[stage];
      b.optimizer_states = home_optimizer;
      if (memory.per_stage.size() <= stage) memory.per_stage.resize(stage + 1);
      if (b.total() > memory.per_stage[stage].total()) memory.per_stage[stage] = b;
    }
  }
  for (std::size_t stage = 0; stage < memory.per_stage.size(); ++stage)
    if (memory.per_stage[stage].total() > memory.per_stage[memory.worst_stage].total())
      memory.worst_stage = static_cast<int>(stage);
  return memory;
}

MemoryEstimate plan_memory(const std::vector<const PhaseSlot*>& slots) {
  std::vector<const MemoryEstimate*> phases;
  for (const PhaseSlot* slot : slots) phases.push_back(&slot->memory);
  return plan_memory(phases);
}

// A pinned plan alone: simulated where it fits, else infeasible with the reason.
Candidate pinned_candidate(const Scenario& scenario, const Profile& profile) {
  const std::vector<HotSwitchPhase> phases = pinned_hot_switch_phases(scenario);
  std::vector<MemoryEstimate> estimates;
  for (const HotSwitchPhase& phase : phases)
    estimates.push_back(estimate_memory(phase_scenario(scenario, phase.workload, phase.packs), phase.strategy));
  std::vector<const MemoryEstimate*> pointers;
  for (const MemoryEstimate& estimate : estimates) pointers.push_back(&estimate);
  const MemoryEstimate memory = plan_memory(pointers);
  const std::vector<SeqLengthCount> batch = batch_sequences(scenario);
  const std::string oom = out_of_memory_reason(memory, scenario.cluster.node_groups.front().gpu.memory_GiB);
  if (oom.empty()) return simulate_hot_switch_plan(scenario, batch, phases, memory, profile, false, nullptr);
  Candidate c;
  c.strategy = phases.back().strategy;
  c.memory = memory;
  auto plan = std::make_shared<HotSwitchPlan>();
  plan->batch = batch;
  plan->phases = phases;
  plan->memory = memory;
  c.plan = plan;
  c.infeasible_reason = oom;
  return c;
}

// Every (a, c, s) phase (sequences of lengths in (length a, length c] run by strategy s) in a fixed slot.
struct PhaseTable {
  int ends = 0, strategies = 0;
  Bytes capacity = 0;
  std::vector<PhaseSlot> slots;
  const PhaseSlot& at(int a, int c, int s) const {
    return slots[(static_cast<std::size_t>(a) * (ends + 1) + c) * strategies + s];
  }
  const PhaseSlot& whole_batch(int s) const { return at(0, ends, s); }  // every sequence in one phase
};

// Every phase prepared (validity, memory), then simulated when it can fit beside some home's optimizer states.
PhaseTable price_phases(const Scenario& scenario, const Profile& profile, const std::vector<SeqLengthCount>& batch,
                        const std::vector<std::int64_t>& boundaries, const std::vector<Strategy>& strategies,
                        int jobs) {
  PhaseTable table;
  table.ends = static_cast<int>(boundaries.size());
  table.strategies = static_cast<int>(strategies.size());
  table.capacity = static_cast<Bytes>(scenario.cluster.node_groups.front().gpu.memory_GiB * kGiB);
  const int m = table.ends, S = table.strategies;
  const auto length_at = [&](int position) { return position == 0 ? std::int64_t{0} : boundaries[position - 1]; };
  table.slots.resize(static_cast<std::size_t>(m + 1) * (m + 1) * S);
  parallel_for(table.slots.size(), jobs, [&](std::size_t k) {
    const int s = static_cast<int>(k % S), c = static_cast<int>(k / S % (m + 1)), a = static_cast<int>(k / S / (m + 1));
    if (a < c) table.slots[k] = prepare_phase(scenario, batch, length_at(a), length_at(c), strategies[s]);
  });
  Bytes least_optimizer = table.capacity;
  for (int s = 0; s < S; ++s)
    if (table.whole_batch(s).valid) least_optimizer = std::min(least_optimizer, table.whole_batch(s).optimizer_bytes);
  std::vector<std::size_t> to_simulate;
  for (std::size_t k = 0; k < table.slots.size(); ++k)
    if (table.slots[k].valid && table.slots[k].non_optimizer_bytes + least_optimizer <= table.capacity)
      to_simulate.push_back(k);
  parallel_for(to_simulate.size(), jobs, [&](std::size_t k) {
    PhaseSlot& slot = table.slots[to_simulate[k]];
    const IterationGraph graph = lower_phase(scenario, slot.phase, profile, false);
    slot.time_ns = static_cast<double>(simulate_iteration(graph, scenario.cluster, profile).iteration_ns);
  });
  return table;
}

// What choose_boundaries prices over `table`: its phases, whether they fit beside a home's optimizer states, the
// switches between strategies (simulated once each, kept in `switch_cache`) and each static baseline's optimizer step.
BoundaryCosts boundary_costs(const Scenario& scenario, const Profile& profile, const PhaseTable& table,
                             const std::vector<Strategy>& strategies, const std::vector<Candidate>& baselines,
                             std::map<std::tuple<int, int, bool>, double>& switch_cache) {
  BoundaryCosts costs;
  costs.ends = table.ends;
  costs.strategies = table.strategies;
  costs.phase_ns = [&table](int a, int c, int s) { return table.at(a, c, s).time_ns; };
  costs.fits = [&table](int a, int c, int s, int home) {
    const PhaseSlot& slot = table.at(a, c, s);
    return slot.valid && slot.time_ns != kNoPhase &&
           slot.non_optimizer_bytes + table.whole_batch(home).optimizer_bytes <= table.capacity;
  };
  costs.switch_ns = [&scenario, &profile, &strategies, &switch_cache](int from, int to, bool gradients) {
    auto [it, inserted] = switch_cache.try_emplace({from, to, gradients}, 0.0);
    if (inserted) {
      const SwitchPlan plan = plan_switch(scenario.model, scenario.cluster, strategies[from], strategies[to], gradients);
      if (!plan.transfers.empty())
        it->second = static_cast<double>(
            simulate_iteration(switch_only_graph(scenario, plan, strategies[to]), scenario.cluster, profile).iteration_ns);
    }
    return it->second;
  };
  costs.optimizer_ns = [&baselines](int home) {
    return static_cast<double>(baselines[home].result.breakdown.optimizer_ns);
  };
  return costs;
}

}  // namespace

double hot_switch_search_ops(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                             const std::vector<std::int64_t>& boundaries, const std::vector<Strategy>& strategies) {
  const std::int64_t world = scenario.cluster.total_gpus();
  double ops = 0;
  for (std::size_t c = 0; c < boundaries.size(); ++c)
    for (std::size_t a = 0; a <= c; ++a) {
      const std::int64_t from = a == 0 ? 0 : boundaries[a - 1];
      const PhaseWorkload workload = pack_range(batch, from, boundaries[c]);
      if (workload.empty()) continue;
      for (Strategy s : strategies) {
        const std::int64_t per_step = std::int64_t{s.micro_batch_size} * (world / s.model_parallel_size());
        s.num_micro_batches = static_cast<int>(std::min<std::int64_t>((workload.packs + per_step - 1) / per_step, 1 << 30));
        ops += static_cast<double>(std::min(estimated_op_count(scenario, s), kMaxOpsPerCandidate));
      }
    }
  return ops;
}

void check_hot_switch_search_size(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                                  const std::vector<std::int64_t>& boundaries, const std::vector<Strategy>& strategies) {
  const double ops = hot_switch_search_ops(scenario, batch, boundaries, strategies);
  if (ops <= kMaxHotSwitchSearchOps) return;
  const std::size_t ranges = boundaries.size() * (boundaries.size() + 1) / 2;
  throw InputError(scenario.source, "/search/hot_switch",
                   fmt::format("a hot-switching search that simulates at most {:.0f} M ops, got about {:.0f} M ({} "
                               "length ranges x {} strategies, each phase simulated whole): list fewer sizes, "
                               "recompute or ZeRO stages under /search, or fewer length buckets",
                               kMaxHotSwitchSearchOps / 1e6, ops / 1e6, ranges, strategies.size()));
}

BoundaryChoice choose_boundaries(const BoundaryCosts& costs, int home) {
  const int m = costs.ends, S = costs.strategies;
  // best[c][s]: the fastest chain covering (0, c] whose last phase runs s; back-pointers to rebuild it.
  std::vector<std::vector<double>> best(m + 1, std::vector<double>(S, kNoPhase));
  std::vector<std::vector<std::pair<int, int>>> from(m + 1, std::vector<std::pair<int, int>>(S, {-1, -1}));
  for (int c = 1; c < m; ++c) {
    for (int s = 0; s < S; ++s) {
      if (costs.fits(0, c, s, home)) {
        const double first = costs.phase_ns(0, c, s) + costs.switch_ns(home, s, false);
        if (first < best[c][s]) best[c][s] = first, from[c][s] = {0, -1};
      }
      for (int k = 1; k < c; ++k) {
        const double phase = costs.fits(k, c, s, home) ? costs.phase_ns(k, c, s) : kNoPhase;
        if (phase == kNoPhase) continue;
        for (int before = 0; before < S; ++before) {
          if (best[k][before] == kNoPhase) continue;
          const double total = best[k][before] + costs.switch_ns(before, s, true) + phase;
          if (total < best[c][s]) best[c][s] = total, from[c][s] = {k, before};
        }
      }
    }
  }
  BoundaryChoice choice;
  int chosen_a = -1, chosen_s = -1;
  for (int a = 1; a < m; ++a) {
    if (!costs.fits(a, m, home, home)) continue;
    const double top = costs.phase_ns(a, m, home);
    if (top == kNoPhase) continue;
    for (int s = 0; s < S; ++s) {
      if (best[a][s] == kNoPhase) continue;
      const double total = best[a][s] + costs.switch_ns(s, home, true) + top + costs.optimizer_ns(home);
      if (total < choice.estimate_ns) choice.estimate_ns = total, chosen_a = a, chosen_s = s;
    }
  }
  if (chosen_a < 0) return {};
  choice.ends = {m};
  choice.strategies = {home};
  for (int c = chosen_a, s = chosen_s; c > 0;) {
    choice.ends.push_back(c);
    choice.strategies.push_back(s);
    const auto [k, before] = from[c][s];
    c = k, s = before;
  }
  std::reverse(choice.ends.begin(), choice.ends.end());
  std::reverse(choice.strategies.begin(), choice.strategies.end());
  return choice;
}

std::vector<Candidate> search_hot_switch(const Scenario& scenario, const Profile& profile, int jobs, int plans) {
  const std::vector<SeqLengthCount> batch = batch_sequences(scenario);
  const std::vector<std::int64_t> boundaries = candidate_boundaries(scenario, batch);
  const std::vector<Strategy> strategies = phase_strategies(scenario);
  check_hot_switch_search_size(scenario, batch, boundaries, strategies);
  const PhaseTable table = price_phases(scenario, profile, batch, boundaries, strategies, jobs);
  const int S = table.strategies;

  // The static baselines: every strategy that fits all sequences packed to the longest length.
  std::vector<Candidate> candidates(S);
  std::vector<bool> is_home(S, false);
  for (int s = 0; s < S; ++s) {
    const PhaseSlot& slot = table.whole_batch(s);
    is_home[s] = slot.valid && slot.non_optimizer_bytes + slot.optimizer_bytes <= table.capacity;
  }
  parallel_for(S, jobs, [&](std::size_t s) {
    if (!is_home[s]) return;
    const PhaseSlot& slot = table.whole_batch(static_cast<int>(s));
    candidates[s] = simulate_hot_switch_plan(scenario, batch, {slot.phase}, plan_memory({&slot}), profile, false, nullptr);
  });

  std::map<std::tuple<int, int, bool>, double> switch_cache;
  const BoundaryCosts costs = boundary_costs(scenario, profile, table, strategies, candidates, switch_cache);
  std::vector<std::pair<BoundaryChoice, int>> choices;
  for (int home = 0; home < S; ++home) {
    if (!is_home[home]) continue;
    BoundaryChoice choice = choose_boundaries(costs, home);
    if (!choice.ends.empty()) choices.push_back({std::move(choice), home});
  }
  std::stable_sort(choices.begin(), choices.end(),
                   [](const auto& x, const auto& y) { return x.first.estimate_ns < y.first.estimate_ns; });
  if (static_cast<int>(choices.size()) > plans) choices.resize(static_cast<std::size_t>(plans));
  std::vector<Candidate> switching(choices.size());
  parallel_for(choices.size(), jobs, [&](std::size_t k) {
    const BoundaryChoice& choice = choices[k].first;
    std::vector<HotSwitchPhase> phases;
    std::vector<const PhaseSlot*> used;
    for (std::size_t p = 0; p < choice.ends.size(); ++p) {
      const PhaseSlot& slot = table.at(p ? choice.ends[p - 1] : 0, choice.ends[p], choice.strategies[p]);
      phases.push_back(slot.phase);
      used.push_back(&slot);
    }
    switching[k] = simulate_hot_switch_plan(scenario, batch, phases, plan_memory(used), profile, false, nullptr);
  });

  std::vector<Candidate> out;
  for (int s = 0; s < S; ++s)
    if (is_home[s]) out.push_back(std::move(candidates[s]));
  for (Candidate& c : switching) out.push_back(std::move(c));
  return out;
}

std::vector<Candidate> hot_switch_family_candidates(const Scenario& scenario, const Profile& profile, int jobs) {
  if (scenario.hot_switch_plan) return {pinned_candidate(scenario, profile)};
  // Its switch units are the embedding, the decoder layers and the output layer: MTP depths would be left unpriced.
  if (!scenario.search.hot_switch || scenario.strategy || scenario.pins_family_plan() ||
      scenario.model.mtp_num_layers > 0)
    return {};
  return search_hot_switch(scenario, profile, jobs);
}

}  // namespace twin
