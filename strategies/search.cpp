// Enumerates the search space, prunes invalid and out-of-memory strategies without simulating them, and
// (unless exhaustive) those whose lower bound cannot reach the top K, simulates the rest with parallel_for
// (this process's share of them when several run the search), appends the plan families' candidates, and
// ranks. Results land in slots indexed by enumeration order, so the ranking is the same whatever the number
// of threads or processes.
#include "strategies/search.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/parallel_for.hpp"
#include "strategies/class_by_class.hpp"
#include "strategies/simulated_results.hpp"
#include "strategies/steady_state.hpp"
#include "sim/price_cache.hpp"
#include "sim/simulate.hpp"
#include "strategies/lower_bound.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

// With one pipeline stage every schedule is plain gradient accumulation: keep one of them.
Strategy normalised(Strategy s) {
  if (s.pipeline_model_parallel_size == 1 && s.schedule != Schedule::double_strand) {
    s.schedule = Schedule::one_f_one_b;
    s.virtual_pipeline_model_parallel_size = 1;
  }
  if (s.tensor_model_parallel_size == 1) s.sequence_parallel = false;
  return s;
}

std::vector<Strategy> strategies_of(const Scenario& scenario) {
  // A fixed asymmetric plan is the heterogeneous family's, a fixed per-layer or hot-switching plan its family's.
  if (!scenario.pipelines.empty() || scenario.pins_family_plan()) return {};
  if (scenario.strategy) return {*scenario.strategy};
  const SearchSpace& space = scenario.search;
  std::vector<Strategy> all;
  for (int pp : space.pipeline_model_parallel_size)
    for (int tp : space.tensor_model_parallel_size)
      for (int cp : space.context_parallel_size)
        for (int ep : space.expert_model_parallel_size)
          for (int etp : space.expert_tensor_parallel_size)
            for (Schedule schedule : space.schedule)
              for (int vpp : space.virtual_pipeline_model_parallel_size)
                for (bool sp : space.sequence_parallel)
                  for (int mbs : space.micro_batch_size)
                    for (int zero : space.zero_stage)
                      for (Recompute recompute : space.recompute) {
                        // Interleaving is what virtual stages are for; other schedules take vpp 1 only.
                        if ((schedule == Schedule::interleaved_1f1b) != (vpp > 1)) continue;
                        Strategy s;
                        s.tensor_model_parallel_size = tp;
                        s.pipeline_model_parallel_size = pp;
                        s.context_parallel_size = cp;
                        s.expert_model_parallel_size = ep;
                        s.expert_tensor_parallel_size = etp;
                        s.virtual_pipeline_model_parallel_size = vpp;
                        s.sequence_parallel = sp;
                        s.micro_batch_size = mbs;
                        s.zero_stage = zero;
                        s.recompute = recompute;
                        s.schedule = schedule;
                        all.push_back(s);
                      }
  return all;
}

// Simulates `order` (ascending lower bounds) in rounds of 32, 64, 128, ... until the next candidate's bound is
// slower than the `keep`-th fastest simulated; `next` ends at the first candidate not simulated. Returns that time.
// After each round `pruned` hears how many candidates are pruned for certain (the fastest only get faster).
TimeNs simulate_in_bound_order(const std::vector<Candidate>& candidates, const std::vector<std::size_t>& order,
                               std::size_t keep, const std::function<void(const std::vector<std::size_t>&)>& simulate,
                               const std::function<void(std::size_t)>& pruned, std::size_t& next) {
  std::vector<TimeNs> fastest;  // the `keep` fastest simulated iteration times, ascending
  TimeNs beat = std::numeric_limits<TimeNs>::max();
  for (std::size_t round = 32; next < order.size() && candidates[order[next]].lower_bound_ns <= beat; round *= 2) {
    std::vector<std::size_t> batch;
    while (next < order.size() && batch.size() < round && candidates[order[next]].lower_bound_ns <= beat)
      batch.push_back(order[next++]);
    simulate(batch);
    for (std::size_t i : batch) fastest.push_back(candidates[i].result.iteration_ns);
    std::sort(fastest.begin(), fastest.end());
    if (fastest.size() > keep) fastest.resize(keep);
    if (fastest.size() == keep) beat = fastest.back();
    const auto first_pruned = std::upper_bound(order.begin() + static_cast<std::ptrdiff_t>(next), order.end(), beat,
                                               [&](TimeNs t, std::size_t i) { return t < candidates[i].lower_bound_ns; });
    pruned(static_cast<std::size_t>(order.end() - first_pruned));
  }
  return beat;
}

void mark_pruned(Candidate& c, std::size_t keep, TimeNs beat) {
  c.feasible = false;
  c.pruned = true;
  c.infeasible_reason = fmt::format(
      "not simulated: its compute and the communication it waits through take at least {:.4f} s, slower than the {} "
      "fastest simulated (the {}th: {:.4f} s); twin simulate --exhaustive simulates every candidate",
      to_seconds(c.lower_bound_ns), keep, keep, to_seconds(beat));
}

bool faster(const Candidate& a, const Candidate& b) {
  if (a.result.iteration_ns != b.result.iteration_ns) return a.result.iteration_ns < b.result.iteration_ns;
  return a.key() < b.key();
}

// Simulates a feasible candidate in place, keeping what the search knew of it before (memory, lower bound).
void simulate_in_place(const Scenario& scenario, const Profile& profile, Candidate& c, sim::PriceCache& prices,
                       Replay replay) {
  MemoryEstimate memory = std::move(c.memory);
  const TimeNs bound = c.lower_bound_ns;
  c = evaluate(scenario, profile, c.strategy, false, nullptr, &prices, replay);
  c.memory = std::move(memory);
  c.lower_bound_ns = bound;
}

// `candidates` ranked (feasible first, fastest first): until none of the `count` fastest was extrapolated, those
// that were are simulated again whole and the feasible ones re-sorted. Each pass replays at least one more whole.
void replay_fastest_whole(const Scenario& scenario, const Profile& profile, std::vector<Candidate>& candidates,
                          std::size_t count, int jobs, sim::PriceCache& prices) {
  const auto feasible_end = std::find_if(candidates.begin(), candidates.end(), [](const Candidate& c) {
    return !c.feasible;
  });
  const std::size_t feasible = static_cast<std::size_t>(feasible_end - candidates.begin());
  for (;;) {
    std::vector<std::size_t> again;
    for (std::size_t i = 0; i < std::min(count, feasible); ++i)
      if (candidates[i].result.steady_state.extrapolated() && !whole_graph_too_large(scenario, candidates[i].strategy))
        again.push_back(i);
    if (again.empty()) return;
    parallel_for(again.size(), jobs, [&](std::size_t k) {
      simulate_in_place(scenario, profile, candidates[again[k]], prices, Replay::whole);
    });
    std::stable_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(feasible), faster);
  }
}

// One search's simulation spread over threads and processes, and its progress line.
class SharedSimulation {
 public:
  SharedSimulation(const Scenario& scenario, const Profile& profile, std::vector<Candidate>& candidates,
                   const SearchOptions& options, Replay replay, std::size_t simulatable)
      : scenario_(scenario), profile_(profile), candidates_(candidates), options_(options), replay_(replay),
        simulatable_(simulatable),
        // This process's share of what may be simulated.
        planned_(static_cast<int>((simulatable + static_cast<std::size_t>(options.processes.count) - 1 -
                                   static_cast<std::size_t>(options.processes.rank)) /
                                  static_cast<std::size_t>(options.processes.count))) {}

  sim::PriceCache prices;  // the candidates repeat each other's op shapes
  const Scenario& scenario() const { return scenario_; }
  const Profile& profile() const { return profile_; }

  // Runs `work` on this process's share of `batch` (all of it with one process), then hands every process the
  // others' results (all_gather of what `encode` wrote, read back by `decode`).
  void share(const std::vector<std::size_t>& batch, const std::function<void(std::size_t)>& work,
             const std::function<std::string(const std::vector<std::size_t>&)>& encode,
             const std::function<void(const std::string&)>& decode, const std::function<void(int, int)>& progress) {
    const SearchProcesses& processes = options_.processes;
    std::vector<std::size_t> mine;
    for (std::size_t k = static_cast<std::size_t>(processes.rank); k < batch.size();
         k += static_cast<std::size_t>(processes.count))
      mine.push_back(batch[k]);
    parallel_for(mine.size(), options_.jobs, [&](std::size_t k) { work(mine[k]); }, progress);
    if (processes.count > 1) {
      const std::vector<std::string> shares = processes.all_gather(encode(mine));
      for (int rank = 0; rank < processes.count; ++rank)
        if (rank != processes.rank) decode(shares.at(rank));
    }
  }

  void simulate(const std::vector<std::size_t>& batch) {
    const auto progress = [&](int done, int total) {
      if (!options_.progress) return;
      options_.progress(std::min(planned_, done_before_ + pruned_share_ + done), planned_);
      if (done == total) done_before_ += done;
    };
    share(
        batch, [&](std::size_t i) { simulate_in_place(scenario_, profile_, candidates_[i], prices, replay_); },
        [&](const std::vector<std::size_t>& mine) { return simulated_results_to_string(candidates_, mine); },
        [&](const std::string& text) { read_simulated_results(text, candidates_); }, progress);
  }

  // Progress over every round counts candidates pruned for certain as done (their share of this process's), so that
  // the line moves steadily to its end.
  void count_pruned(std::size_t pruned) {
    pruned_share_ = static_cast<int>(static_cast<double>(pruned) * planned_ / static_cast<double>(simulatable_));
    if (options_.progress) options_.progress(std::min(planned_, done_before_ + pruned_share_), planned_);
  }
  void end_progress() {
    if (options_.progress && done_before_ + pruned_share_ < planned_) options_.progress(planned_, planned_);
  }

 private:
  const Scenario& scenario_;
  const Profile& profile_;
  std::vector<Candidate>& candidates_;
  const SearchOptions& options_;
  const Replay replay_;
  const std::size_t simulatable_;
  const int planned_;
  int done_before_ = 0, pruned_share_ = 0;
};

// Bounds every candidate of `to_simulate` from below, simulates them in ascending bounds while a bound can still
// reach the `keep` fastest, and marks the rest pruned.
void simulate_unless_bounded_out(SharedSimulation& simulation, std::vector<Candidate>& candidates,
                                 const std::vector<std::size_t>& to_simulate, std::size_t keep) {
  // Candidates whose bounds are one (GPipe and 1F1B of otherwise equal strategies) are bounded once.
  std::vector<std::size_t> to_bound;
  std::vector<std::size_t> bounded_as(candidates.size());
  std::map<std::string, std::size_t> first_of_bound;
  for (std::size_t i : to_simulate) {
    const Strategy bounded = lower_bound_strategy(candidates[i].strategy);
    const auto [first, fresh] =
        first_of_bound.try_emplace(fmt::format("{}.m{}", bounded.key(), bounded.num_micro_batches), i);
    bounded_as[i] = first->second;
    if (fresh) to_bound.push_back(i);
  }
  simulation.share(
      to_bound,
      [&](std::size_t i) {
        candidates[i].lower_bound_ns =
            compute_lower_bound_ns(simulation.scenario(), candidates[i].strategy, simulation.profile(),
                                   &simulation.prices);
      },
      [&](const std::vector<std::size_t>& mine) { return lower_bounds_to_string(candidates, mine); },
      [&](const std::string& text) { read_lower_bounds(text, candidates); }, {});
  for (std::size_t i : to_simulate) candidates[i].lower_bound_ns = candidates[bounded_as[i]].lower_bound_ns;
  std::vector<std::size_t> order = to_simulate;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return candidates[a].lower_bound_ns < candidates[b].lower_bound_ns;
  });
  std::size_t next = 0;
  const TimeNs beat = simulate_in_bound_order(
      candidates, order, keep, [&](const std::vector<std::size_t>& batch) { simulation.simulate(batch); },
      [&](std::size_t pruned) { simulation.count_pruned(pruned); }, next);
  simulation.end_progress();
  for (; next < order.size(); ++next) mark_pruned(candidates[order[next]], keep, beat);
}

// Feasible (fastest first), then pruned (lowest bound first), then infeasible (in enumeration order).
void rank_in_groups(std::vector<Candidate>& candidates) {
  const auto group = [](const Candidate& c) { return c.feasible ? 0 : c.pruned ? 1 : 2; };
  std::stable_sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    if (group(a) == 0) return faster(a, b);
    if (group(a) == 1)
      return a.lower_bound_ns != b.lower_bound_ns ? a.lower_bound_ns < b.lower_bound_ns : a.key() < b.key();
    return false;
  });
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const Scenario& scenario) {
  std::vector<Candidate> candidates;
  std::set<std::string> seen;
  for (Strategy strategy : strategies_of(scenario)) {
    Candidate candidate;
    if (auto reason = complete_strategy(scenario, strategy)) {
      candidate.infeasible_reason = *reason;
    } else {
      if (!scenario.strategy) strategy = normalised(strategy);
      if (auto invalid = invalid_reason(scenario, strategy)) candidate.infeasible_reason = *invalid;
    }
    candidate.strategy = strategy;
    if (!seen.insert(strategy.key()).second) continue;
    if (candidate.infeasible_reason.empty()) {
      candidate.memory = estimate_memory(scenario, strategy);
      candidate.infeasible_reason = uniform_out_of_memory_reason(scenario, strategy, candidate.memory);
    }
    candidate.feasible = candidate.infeasible_reason.empty();
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

Candidate evaluate(const Scenario& scenario, const Profile& profile, const Strategy& strategy, bool record_op_timings,
                   IterationGraph* graph_out, sim::PriceCache* prices, Replay replay) {
  Candidate candidate;
  candidate.strategy = strategy;
  candidate.memory = estimate_memory(scenario, strategy);
  candidate.feasible = true;
  const bool whole_graph_wanted = record_op_timings || graph_out != nullptr;
  // A graph too large to hold whole is only ever replayed as its steady state (its validity says it has one).
  const bool extrapolate = replay == Replay::steady_state || whole_graph_too_large(scenario, strategy).has_value();
  const std::optional<SteadyStateReplay> steady =
      extrapolate && !whole_graph_wanted ? steady_state_replay(scenario, strategy) : std::nullopt;
  if (steady) {
    candidate.result = simulate_steady_state(scenario, strategy, profile, *steady, prices);
  } else if (!whole_graph_wanted) {
    candidate.result = simulate_class_by_class(scenario, strategy, profile, prices, &candidate.strand_pairings);
  } else {
    IterationGraph graph = lower_to_op_graphs(scenario, strategy, profile, &candidate.strand_pairings);
    candidate.result = simulate_iteration(graph, scenario.cluster, profile, SimOptions{record_op_timings, prices});
    if (graph_out) *graph_out = std::move(graph);
  }
  candidate.throughput = throughput(scenario, strategy, to_seconds(candidate.result.iteration_ns));
  return candidate;
}

Candidate evaluate_again(const Scenario& scenario, const Profile& profile, const Candidate& candidate,
                         bool record_op_timings, IterationGraph* graph) {
  Candidate again = candidate.plan ? candidate.plan->evaluate(scenario, profile, record_op_timings, graph)
                                   : evaluate(scenario, profile, candidate.strategy, record_op_timings, graph);
  if (candidate.plan && !again.plan) again.plan = candidate.plan;
  return again;
}

void for_each_candidate_op(const Scenario& scenario, const std::function<void(const Op&)>& visit) {
  for (const Candidate& candidate : enumerate_candidates(scenario)) {
    if (!candidate.feasible) continue;
    const IterationGraph graph = lower_to_op_graphs(scenario, candidate.strategy);
    for (const RankClass& rank_class : graph.classes)
      for (OpIndex i = 0; i < rank_class.size(); ++i) visit(rank_class.op(i));
  }
}

std::vector<Candidate> search(const Scenario& scenario, const Profile& profile,
                              const std::vector<FamilySearch>& families, const SearchOptions& options) {
  std::vector<Candidate> candidates = enumerate_candidates(scenario);
  std::vector<std::size_t> to_simulate;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].feasible) to_simulate.push_back(i);

  // Extrapolating saves nothing where every candidate would be replayed whole at the end anyway.
  const std::size_t whole_top = static_cast<std::size_t>(std::max(0, options.whole_top));
  const Replay replay =
      options.full_replay || to_simulate.size() <= whole_top ? Replay::whole : Replay::steady_state;
  SharedSimulation simulation(scenario, profile, candidates, options, replay, to_simulate.size());
  const std::size_t keep = static_cast<std::size_t>(std::max(1, options.exact_top));
  if (options.exhaustive || to_simulate.size() <= keep)  // nothing to prune: no bounds to compute
    simulation.simulate(to_simulate);
  else
    simulate_unless_bounded_out(simulation, candidates, to_simulate, keep);
  for (const FamilySearch& family : families)
    for (Candidate& c : family(scenario, profile, options.jobs)) candidates.push_back(std::move(c));

  rank_in_groups(candidates);
  replay_fastest_whole(scenario, profile, candidates, whole_top, options.jobs, simulation.prices);
  return candidates;
}

}  // namespace twin
