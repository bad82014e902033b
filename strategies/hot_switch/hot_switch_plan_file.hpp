// A hot-switching plan read back from a plan file (best.json's family_plan.detail, written by
// HotSwitchPlan::to_json): its phases rebuilt from the plan's scenario, each strategy validated for its phase,
// and every count the file states checked against the rebuilt phase, so that the commands reading a plan
// lower the graph the simulator priced.
#pragma once
#include <string>
#include <vector>

#include "core/plan_file.hpp"
#include "strategies/hot_switch/hot_switch_graph.hpp"

namespace twin {

// The phases in run order (home last). Throws InputError naming `source` and the JSON path at fault
// (/family_plan/detail/phases/<p>/...).
std::vector<HotSwitchPhase> read_hot_switch_phases(const Plan& plan, const std::string& source);

}  // namespace twin
