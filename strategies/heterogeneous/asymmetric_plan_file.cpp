#include "strategies/heterogeneous/asymmetric_plan_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/scenario_pipelines.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"

namespace twin {

AsymmetricPlanDetail read_asymmetric_plan(const Plan& plan, const std::string& source) {
  const JsonReader family = JsonReader(plan.document, source).required("family_plan");
  const JsonReader detail = family.required("detail");
  detail.expect_object();
  detail.only_keys({"pipelines", "stage_gpus", "sequence_parallel", "recompute", "schedule", "zero_stage"});
  AsymmetricPlanDetail out;
  out.pipelines = parse_pipelines(detail.required("pipelines"), plan.scenario);
  out.shared = plan.strategy;
  out.shared.sequence_parallel = detail.required("sequence_parallel").boolean();
  out.shared.recompute = *recompute_from_string(detail.required("recompute").one_of(recompute_names(), "recompute"));
  const JsonReader schedule = detail.required("schedule");
  out.shared.schedule = schedule.one_of({"1f1b", "gpipe"}, "asymmetric plan schedule") == "gpipe"
                            ? Schedule::gpipe
                            : Schedule::one_f_one_b;
  out.shared.zero_stage = static_cast<int>(detail.required("zero_stage").integer(0, 1));
  // The file's strategy pins the plan (written since 2026-11-29; before, the home strategy, which pins none): it must
  // be the detail's, which the family lowers.
  if (!plan.scenario.pipelines.empty() && asymmetric_strategy_json(plan.strategy, plan.scenario.pipelines) !=
                                              asymmetric_strategy_json(out.shared, out.pipelines))
    detail.fail_plain("expected the plan of the file's strategy (/strategy: pipelines, sequence_parallel, recompute, "
                      "schedule and zero_stage alike)");
  const JsonReader key = family.required("key");
  const std::string expected = asymmetric_plan_key(out.shared, out.pipelines);
  if (key.string() != expected) key.fail(fmt::format("\"{}\" (the key of its detail)", expected));
  return out;
}

}  // namespace twin
