// The list of plan families, each through its own search entry point.
#include "strategies/families/families.hpp"

#include "strategies/heterogeneous/heterogeneous_search.hpp"
#include "strategies/hot_switch/hot_switch_plan_file.hpp"
#include "strategies/hot_switch/hot_switch_search.hpp"
#include "strategies/per_layer/per_layer_plan_file.hpp"
#include "strategies/per_layer/per_layer_search.hpp"

namespace twin {

const std::vector<FamilySearch>& plan_families() {
  static const std::vector<FamilySearch> families = {
      heterogeneous_family_candidates,
      hot_switch_family_candidates,
      // The per-layer search prices layer strategies one after another: it takes no jobs.
      [](const Scenario& scenario, const Profile& profile, int) { return per_layer_candidates(scenario, profile); },
  };
  return families;
}

void check_pinned_family_plan(const Scenario& scenario) {
  if (scenario.per_layer_plan) pinned_per_layer_plan(scenario);
  if (scenario.hot_switch_plan) pinned_hot_switch_phases(scenario);
}

}  // namespace twin
