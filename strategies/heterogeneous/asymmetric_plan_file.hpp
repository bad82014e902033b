// An asymmetric plan read back from a plan file (best.json's family_plan.detail, written by AsymmetricPlan::to_json):
// its pipelines, checked against the plan's scenario as a scenario's strategy.pipelines are (core/scenario_pipelines.hpp),
// and the fields they share. The file's key must be the key of its detail, so that the commands reading a plan
// lower the graph the simulator priced.
#pragma once
#include <string>
#include <vector>

#include "core/plan_file.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"

namespace twin {

struct AsymmetricPlanDetail {
  Strategy shared;  // the plan file's strategy with the detail's shared fields (sequence_parallel, recompute, ...)
  std::vector<AsymmetricPipeline> pipelines;
};

// Throws InputError naming `source` and the JSON path at fault (/family_plan/detail/...).
AsymmetricPlanDetail read_asymmetric_plan(const Plan& plan, const std::string& source);

}  // namespace twin
