// The verdict is the plan check's, run on the plan as twin execute would read it back: one check, so a plan the
// simulator calls executable is one twin execute starts.
#include "pipeline/executable_plans.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "executor/plan_check.hpp"
#include "reports/best_plan.hpp"
#include "strategies/validity.hpp"

namespace twin {

std::string executable_verdict(const Scenario& scenario, const Candidate& candidate) {
  if (!candidate.plan)
    if (const auto too_large = whole_graph_too_large(scenario, candidate.strategy))
      return "not checked: " + *too_large;
  try {
    exec::check_executable_plan(candidate_plan(scenario, candidate), "best.json");
    return "yes";
  } catch (const InputError& refusal) {
    return "no: at " + refusal.json_path() + ": " + refusal.expected();
  }
}

void check_executable(const Scenario& scenario, std::vector<Candidate>& ranked, std::size_t count, std::size_t chosen) {
  for (std::size_t k = 0; k < std::min(count, ranked.size()) && ranked[k].feasible; ++k)
    ranked[k].executable = executable_verdict(scenario, ranked[k]);
  if (ranked[chosen].executable.empty()) ranked[chosen].executable = executable_verdict(scenario, ranked[chosen]);
}

}  // namespace twin
