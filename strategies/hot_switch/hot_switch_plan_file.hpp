// A hot-switching plan read back from a plan file (best.json's family_plan.detail, written by
// HotSwitchPlan::to_json) or pinned by a scenario (strategy.hot_switch, the same object): its phases rebuilt from
// the scenario, each strategy validated for its phase, and every count the file states checked against the
// rebuilt phase, so that the commands reading a plan lower the graph the simulator priced.
#pragma once
#include <string>
#include <vector>

#include "core/json_reader.hpp"
#include "core/plan_file.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"

namespace twin {

// The phases in run order (home last). Throws InputError naming `source` and the JSON path at fault
// (/family_plan/detail/phases/<p>/...).
std::vector<HotSwitchPhase> read_hot_switch_phases(const Plan& plan, const std::string& source);

// The phases of the object at `detail` (its "phases" array) for `scenario`; errors at detail's paths.
std::vector<HotSwitchPhase> read_hot_switch_detail(const JsonReader& detail, const Scenario& scenario);

// A scenario's pinned plan (scenario.hot_switch_plan): its phases, errors naming the scenario file and the path
// under /strategy/hot_switch.
std::vector<HotSwitchPhase> pinned_hot_switch_phases(const Scenario& scenario);

}  // namespace twin
