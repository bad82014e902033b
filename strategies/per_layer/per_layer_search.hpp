// The per-layer family's search: for every pipeline size, schedule and stage micro-batch of the scenario,
// stages balanced by memory, then per stage the dynamic programme over layers x layer strategies x
// memory; each plan is lowered and simulated in the event engine, so that it ranks against the uniform
// strategies on the same footing.
#pragma once
#include <vector>

#include "strategies/per_layer/per_layer.hpp"
#include "strategies/search.hpp"

namespace twin {

// Candidates with `plan` set (family "per-layer"), feasible ones simulated; empty unless
// scenario.search.per_layer and no pinned strategy. A plan pinned by the scenario (strategy.per_layer) is the only
// candidate, infeasible where it does not fit. Dense models with context parallel 1 only.
// Plans that are one uniform Megatron strategy with an even split are left out: the uniform search
// has them. Deterministic.
std::vector<Candidate> per_layer_candidates(const Scenario& scenario, const Profile& profile);

// Simulates one plan (lowered with lower_per_layer_plan).
Candidate evaluate_per_layer(const Scenario& scenario, const Profile& profile, const PerLayerPlan& plan,
                             bool record_op_timings, IterationGraph* graph = nullptr);

// The layer strategies the search tries for `plan`'s pipeline size and stage micro-batch: every TP
// degree of the scenario dividing the stage's GPUs (and heads, query groups, FFN width), Ulysses at
// the same degrees where the sequence divides too, x ZeRO stages (none above 0 without data
// parallelism) x recompute.
std::vector<LayerStrategy> layer_strategy_space(const Scenario& scenario, int pipeline_stages, int stage_micro_batch);

}  // namespace twin
