// The search: enumerate the scenario's strategies, explain the invalid ones, prune what does not fit
// memory, simulate the rest on all cores, and rank by throughput. Deterministic whatever `jobs` is.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "sim/result.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"

namespace twin {

struct Candidate;

// A plan beyond one uniform strategy: issue 6's families (hot switching by sequence length, per-layer
// hybrid, asymmetric pipelines on heterogeneous clusters). The family's search fills it in, and the
// candidate's `strategy` then holds the plan's home (base) strategy.
struct FamilyPlan {
  std::string family;     // "hot-switch", "per-layer", "heterogeneous"
  std::string key;        // unique, stable identity of the plan (ranking, file names, best.json)
  std::string summary;    // the plan in words, one line, for ranking.csv and the report
  nlohmann::json detail;  // the plan as best.json carries it
  // Simulates the plan again, recording op timings when asked and handing back the graphs it simulated:
  // the report, the traces and best.json of the top K use it.
  std::function<Candidate(const Profile& profile, bool record_op_timings, IterationGraph* graph)> evaluate;
};

struct Candidate {
  Strategy strategy;
  std::optional<FamilyPlan> plan;  // set for the families beyond one uniform strategy
  bool feasible = false;
  std::string infeasible_reason;   // empty when feasible
  MemoryEstimate memory;           // empty when the strategy was invalid
  IterationResult result;          // zero unless simulated
  Throughput throughput;
  std::vector<StrandPairingSummary> strand_pairings;  // double-strand: what the pairing chose (first stage)

  // The plan's identity: the family plan's key, else the strategy's key.
  std::string key() const { return plan ? plan->key : strategy.key(); }
  // "uniform" for one Megatron-style strategy (double strand included), else the plan's family.
  std::string family() const { return plan ? plan->family : "uniform"; }
};

// Simulates a candidate again: its family plan's evaluate, or evaluate() of its strategy.
Candidate evaluate_again(const Scenario& scenario, const Profile& profile, const Candidate& candidate,
                         bool record_op_timings, IterationGraph* graph);

// Every strategy of the search space (or the pinned one), completed; invalid ones keep their reason.
std::vector<Candidate> enumerate_candidates(const Scenario& scenario);

struct SearchOptions {
  int jobs = 0;                                      // 0 = all cores
  std::function<void(int done, int total)> progress; // called from the caller's thread only
};

// Feasible candidates first, fastest first; then infeasible ones in enumeration order.
std::vector<Candidate> search(const Scenario& scenario, const Profile& profile, const SearchOptions& options = {});

// Simulates one complete, valid strategy (used by search and by the report for the top K). With `graph`,
// hands back the op graphs it simulated, so that traces and plans show exactly those.
Candidate evaluate(const Scenario& scenario, const Profile& profile, const Strategy& strategy, bool record_op_timings,
                   IterationGraph* graph = nullptr);

// Calls `visit` for every op of every feasible candidate's op graphs: the shapes a calibration of this
// scenario must measure.
void for_each_candidate_op(const Scenario& scenario, const std::function<void(const Op&)>& visit);

}  // namespace twin
