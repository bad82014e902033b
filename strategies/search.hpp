// The search: enumerate the scenario's strategies, explain the invalid ones, prune what does not fit
// memory, simulate the rest on all cores, add the plan families' candidates, and rank by throughput.
// Deterministic whatever `jobs` is.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost/profile.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "sim/result.hpp"
#include "sim/price_cache.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "strategies/memory.hpp"

namespace twin {

struct Candidate;

// A plan beyond one uniform strategy, as a candidate holds it: one implementation per plan family
// (strategies/hot_switch/, per_layer/, heterogeneous/), each a struct of the plan's own typed fields that
// reports read back with Candidate::plan_as. The candidate's `strategy` holds the plan's home strategy.
class FamilyPlan {
 public:
  virtual ~FamilyPlan() = default;
  virtual std::string family() const = 0;   // "hot-switch", "per-layer", "heterogeneous" (ranking.csv, best.json)
  virtual std::string key() const = 0;       // unique, stable identity of the plan (ranking, file names, best.json)
  virtual std::string summary() const = 0;   // the plan in words, one line, for ranking.csv and the report
  virtual nlohmann::json to_json() const = 0;  // the plan as best.json carries it
  // best.json's `strategy` where the home strategy cannot stand there (a plan file's strategy pins the scenario
  // read back, core/plan_file.hpp); none: the home strategy.
  virtual std::optional<nlohmann::json> plan_file_strategy() const { return std::nullopt; }
  // Simulates the plan again (in `scenario`, the one it was searched in), recording op timings when asked and
  // handing back the graphs it simulated: the report, the traces and best.json of the top K use it.
  virtual Candidate evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                             IterationGraph* graph) const = 0;

 protected:
  FamilyPlan() = default;
  FamilyPlan(const FamilyPlan&) = default;
  FamilyPlan& operator=(const FamilyPlan&) = default;
};

struct Candidate {
  Strategy strategy;
  std::shared_ptr<const FamilyPlan> plan;  // set for the families beyond one uniform strategy
  bool feasible = false;
  std::string infeasible_reason;   // empty when feasible
  MemoryEstimate memory;           // empty when the strategy was invalid
  IterationResult result;          // zero unless simulated
  Throughput throughput;
  std::vector<StrandPairingSummary> strand_pairings;  // double-strand: what the pairing chose (first stage)
  // A feasible strategy the search did not simulate because its lower bound (strategies/lower_bound.hpp) is
  // slower than the K-th fastest simulated: `feasible` is false (nothing simulated) and the reason says so.
  bool pruned = false;
  TimeNs lower_bound_ns = 0;       // set for every uniform candidate a pruned search bounded
  // Whether twin execute runs the plan, as its plan check says (pipeline/executable_plans.hpp): "yes" or "no: at
  // PATH: why"; empty where twin simulate did not ask (beyond the ten fastest and the chosen plan).
  std::string executable;

  // The plan's identity: the family plan's key, else the strategy's key.
  std::string key() const { return plan ? plan->key() : strategy.key(); }
  // "uniform" for one Megatron-style strategy (double strand included), else the plan's family.
  std::string family() const { return plan ? plan->family() : "uniform"; }
  // The family plan as its own type (e.g. PerLayerPlan), or null when the candidate holds none of that family.
  template <class Plan>
  const Plan* plan_as() const {
    return dynamic_cast<const Plan*>(plan.get());
  }
};

// Simulates a candidate again: its family plan's evaluate, or evaluate() of its strategy.
Candidate evaluate_again(const Scenario& scenario, const Profile& profile, const Candidate& candidate,
                         bool record_op_timings, IterationGraph* graph);

// Every strategy of the search space (or the pinned one), completed; invalid ones keep their reason.
std::vector<Candidate> enumerate_candidates(const Scenario& scenario);

// One process's share of a search that several processes run together (`mpirun -n N twin simulate`, or srun):
// this process simulates the uniform candidates whose position among those to simulate is rank (mod count);
// `all_gather` then hands every process's results (an opaque string each, indexed by rank) to every process,
// so that each ranks the same candidates with the same results: the output does not depend on the count.
// The plan families' searches run whole in every process. One process: count 1, no all_gather.
struct SearchProcesses {
  int rank = 0;
  int count = 1;
  std::function<std::vector<std::string>(const std::string& mine)> all_gather;
};

// How many of the fastest uniform candidates a pruned search simulates for certain: the report charts ten.
inline constexpr int kExactTop = 10;

struct SearchOptions {
  int jobs = 0;                                      // 0 = all cores (parallel_for's rule)
  std::function<void(int done, int total)> progress; // called from the caller's thread only
  SearchProcesses processes;
  // Simulate every feasible uniform candidate (else prune: the `exact_top` fastest are exact, the candidates
  // whose lower bound is slower than the exact_top-th fastest simulated are not simulated).
  bool exhaustive = false;
  int exact_top = kExactTop;
  // Replay every candidate's iteration whole (else a long pipeline's steady state is extrapolated from two
  // shorter replays where that holds at most 2/3 of its micro-batches: strategies/steady_state.hpp).
  bool full_replay = false;
  // The fastest this many are replayed whole in any case (an extrapolated one is simulated again and the ranking
  // re-sorted until they all were): the winner and top K that twin simulate prints, traces and writes. Neither this
  // nor full_replay replays a candidate whose whole graph exceeds the op limit (whole_graph_too_large,
  // strategies/validity.hpp): its steady state stands.
  int whole_top = 0;
};

// One plan family's search: its candidates for the scenario (feasible ones simulated), none where the
// family does not apply; `jobs` as SearchOptions::jobs. strategies/families/ lists every family.
using FamilySearch = std::function<std::vector<Candidate>(const Scenario& scenario, const Profile& profile, int jobs)>;

// The uniform strategies, then each of `families`' candidates in that order. Feasible candidates first,
// fastest first; then pruned ones, lowest bound first; then infeasible ones in enumeration order.
// Pruning: uniform candidates are simulated in rounds (32, 64, 128, ... in order of their lower bound) and a
// round's results set the bound later rounds must beat, so what is simulated depends only on the inputs, never
// on jobs or processes.
std::vector<Candidate> search(const Scenario& scenario, const Profile& profile,
                              const std::vector<FamilySearch>& families, const SearchOptions& options = {});

// How much of an iteration a simulation replays: all of it, or (where strategies/steady_state.hpp applies, and no op
// timings or graph are asked for) two shorter replays of its steady state, extrapolated.
enum class Replay { whole, steady_state };

// Simulates one complete, valid strategy (used by search and by the report for the top K). With `graph`,
// hands back the op graphs it simulated, so that traces and plans show exactly those; with `prices`, shares
// compute-op prices with the search's other simulations (sim/price_cache.hpp).
Candidate evaluate(const Scenario& scenario, const Profile& profile, const Strategy& strategy, bool record_op_timings,
                   IterationGraph* graph = nullptr, sim::PriceCache* prices = nullptr, Replay replay = Replay::whole);

// Calls `visit` for every op of every feasible candidate's op graphs: the shapes a calibration of this
// scenario must measure.
void for_each_candidate_op(const Scenario& scenario, const std::function<void(const Op&)>& visit);

}  // namespace twin
