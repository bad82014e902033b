// Whether twin execute runs a candidate the search ranked, found without a GPU by the executor's own plan check
// (executor/plan_check.hpp) on the plan best.json would hold for it (reports/best_plan.hpp's candidate_plan).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/scenario.hpp"
#include "strategies/search.hpp"

namespace twin {

// "yes", or "no: at JSON_PATH: EXPECTED" as the plan check refuses the plan (naming what twin execute does not
// run: LayerNorm, tp_comm_overlap, FP8, a layout it cannot switch into, ...), or "not checked: ..." for a
// candidate whose whole op graph is beyond the op limit (no plan can be written for it).
std::string executable_verdict(const Scenario& scenario, const Candidate& candidate);

// Sets `executable` of the first `count` feasible candidates of `ranked` (ranked order) and of ranked[chosen].
void check_executable(const Scenario& scenario, std::vector<Candidate>& ranked, std::size_t count, std::size_t chosen);

}  // namespace twin
