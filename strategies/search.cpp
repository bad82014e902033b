// Enumerates the search space, prunes invalid and out-of-memory strategies without simulating them,
// simulates the rest with parallel_for (this process's share of them when several run the search), appends
// the plan families' candidates, and ranks. Results land in slots indexed by enumeration order, so the
// ranking is the same whatever the number of threads or processes.
#include "strategies/search.hpp"

#include <algorithm>
#include <set>

#include "core/parallel_for.hpp"
#include "strategies/simulated_results.hpp"
#include "sim/price_cache.hpp"
#include "sim/simulate.hpp"
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
  if (!scenario.pipelines.empty()) return {};  // a fixed asymmetric plan: the heterogeneous family's
  if (scenario.strategy) return {*scenario.strategy};
  const SearchSpace& space = scenario.search;
  std::vector<Strategy> all;
  for (int pp : space.pipeline_model_parallel_size)
    for (int tp : space.tensor_model_parallel_size)
      for (int cp : space.context_parallel_size)
        for (int ep : space.expert_model_parallel_size)
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

bool faster(const Candidate& a, const Candidate& b) {
  if (a.result.iteration_ns != b.result.iteration_ns) return a.result.iteration_ns < b.result.iteration_ns;
  return a.key() < b.key();
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
                   IterationGraph* graph_out, sim::PriceCache* prices) {
  Candidate candidate;
  candidate.strategy = strategy;
  candidate.memory = estimate_memory(scenario, strategy);
  candidate.feasible = true;
  IterationGraph graph = lower_to_op_graphs(scenario, strategy, profile, &candidate.strand_pairings);
  candidate.result = simulate_iteration(graph, scenario.cluster, profile, SimOptions{record_op_timings, prices});
  candidate.throughput = throughput(scenario, strategy, to_seconds(candidate.result.iteration_ns));
  if (graph_out) *graph_out = std::move(graph);
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

  // This process's share (all of them with one process); the others' results come from all_gather.
  const SearchProcesses& processes = options.processes;
  std::vector<std::size_t> mine;
  for (std::size_t k = static_cast<std::size_t>(processes.rank); k < to_simulate.size();
       k += static_cast<std::size_t>(processes.count))
    mine.push_back(to_simulate[k]);
  sim::PriceCache prices;  // the candidates repeat each other's op shapes
  parallel_for(
      mine.size(), options.jobs,
      [&](std::size_t k) {
        Candidate& c = candidates[mine[k]];
        MemoryEstimate memory = std::move(c.memory);
        c = evaluate(scenario, profile, c.strategy, false, nullptr, &prices);
        c.memory = std::move(memory);
      },
      options.progress);
  if (processes.count > 1) {
    const std::vector<std::string> shares = processes.all_gather(simulated_results_to_string(candidates, mine));
    for (int rank = 0; rank < processes.count; ++rank)
      if (rank != processes.rank) read_simulated_results(shares.at(rank), candidates);
  }
  for (const FamilySearch& family : families)
    for (Candidate& c : family(scenario, profile, options.jobs)) candidates.push_back(std::move(c));

  std::stable_partition(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.feasible; });
  auto first_infeasible = std::find_if(candidates.begin(), candidates.end(), [](const Candidate& c) { return !c.feasible; });
  std::sort(candidates.begin(), first_infeasible, faster);
  return candidates;
}

}  // namespace twin
