// The layer strategies are checked against the search's own space (layer_strategy_space): what it holds, the
// lowering takes.
#include "strategies/per_layer/per_layer_plan_file.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "strategies/per_layer/per_layer_search.hpp"

namespace twin {

PerLayerPlan read_per_layer_plan(const Plan& plan, const std::string& source) {
  const JsonReader family = JsonReader(plan.document, source).required("family_plan");
  const JsonReader detail = family.required("detail");
  const Scenario& scenario = plan.scenario;
  const int gpus = scenario.cluster.total_gpus();
  PerLayerPlan out;
  const JsonReader stages = detail.required("pipeline_model_parallel_size");
  out.pipeline_stages = static_cast<int>(stages.integer(1, scenario.model.num_layers));
  if (gpus % out.pipeline_stages != 0) stages.fail(fmt::format("a divisor of the cluster's {} GPUs", gpus));
  out.stage_micro_batch = detail.required("stage_micro_batch_size").positive_int();
  out.num_micro_batches = detail.required("num_micro_batches").positive_int();
  const JsonReader schedule = detail.required("schedule");
  out.schedule = schedule.one_of({"1f1b", "gpipe"}, "per-layer schedule") == "gpipe" ? Schedule::gpipe
                                                                                      : Schedule::one_f_one_b;
  const JsonReader split = detail.required("stage_num_layers");
  int layers = 0;
  for (const JsonReader& count : split.non_empty_elements()) {
    out.stage_layers.push_back(static_cast<int>(count.integer(1, scenario.model.num_layers)));
    layers += out.stage_layers.back();
  }
  if (static_cast<int>(out.stage_layers.size()) != out.pipeline_stages || layers != scenario.model.num_layers)
    split.fail(fmt::format("{} stages' layer counts summing to the model's {} layers", out.pipeline_stages,
                           scenario.model.num_layers));
  const std::vector<LayerStrategy> space = layer_strategy_space(scenario, out.pipeline_stages, out.stage_micro_batch);
  const JsonReader list = detail.required("layers");
  for (const JsonReader& entry : list.non_empty_elements()) {
    entry.expect_object();
    LayerStrategy s;
    s.layout.ulysses = entry.required("layout").one_of({"tensor", "ulysses"}, "layer layout") == "ulysses";
    s.layout.group = entry.required("group_size").positive_int();
    s.zero_stage = static_cast<int>(entry.required("zero_stage").integer(0, 3));
    s.recompute = *recompute_from_string(entry.required("recompute").one_of(recompute_names(), "recompute"));
    if (std::find(space.begin(), space.end(), s) == space.end())
      entry.fail(fmt::format("a layer strategy the search tries on {} GPUs per stage with {} samples per micro-batch",
                             gpus / out.pipeline_stages, out.stage_micro_batch));
    out.layers.push_back(s);
  }
  if (static_cast<int>(out.layers.size()) != scenario.model.num_layers)
    list.fail(fmt::format("one entry per layer ({})", scenario.model.num_layers));
  const JsonReader key = family.required("key");
  if (key.string() != out.key()) key.fail(fmt::format("\"{}\" (the key of its detail)", out.key()));
  Strategy home = home_strategy(scenario, out);
  if (!(home == plan.strategy)) {
    home.num_micro_batches = plan.strategy.num_micro_batches;  // left to the family plan (core/plan_file.cpp)
    if (!(home == plan.strategy))
      JsonReader(plan.document, source).required("strategy").fail(fmt::format("\"{}\" (the plan's home strategy)",
                                                                              home.key()));
  }
  return out;
}

}  // namespace twin
