// The layer strategies are checked against the search's own space (layer_strategy_space): what it holds, the
// lowering takes.
#include "strategies/per_layer/per_layer_plan_file.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "strategies/per_layer/per_layer_search.hpp"

namespace twin {

namespace {

// Every layer strategy a stage can run: the search's space over every TP size dividing the cluster, every ZeRO
// stage and recompute (layer_strategy_space keeps those the stage's GPUs and micro-batch allow).
SearchSpace every_layer_strategy(const Scenario& scenario) {
  SearchSpace space = scenario.search;
  space.tensor_model_parallel_size.clear();
  for (int t = 1; t <= scenario.cluster.total_gpus(); ++t)
    if (scenario.cluster.total_gpus() % t == 0) space.tensor_model_parallel_size.push_back(t);
  space.zero_stage = {0, 1, 2, 3};
  space.recompute = {Recompute::none, Recompute::selective, Recompute::full};
  return space;
}

}  // namespace

PerLayerPlan read_per_layer_detail(const JsonReader& detail, const Scenario& scenario) {
  detail.expect_object();
  detail.only_keys({"pipeline_model_parallel_size", "stage_micro_batch_size", "num_micro_batches", "schedule",
                    "stage_num_layers", "layers"});  // PerLayerPlan::to_json's keys
  const int gpus = scenario.cluster.total_gpus();
  PerLayerPlan out;
  const JsonReader stages = detail.required("pipeline_model_parallel_size");
  out.pipeline_stages = static_cast<int>(stages.integer(1, scenario.model.num_layers));
  if (gpus % out.pipeline_stages != 0) stages.fail(fmt::format("a divisor of the cluster's {} GPUs", gpus));
  out.stage_micro_batch = detail.required("stage_micro_batch_size").positive_int();
  out.num_micro_batches = detail.required("num_micro_batches").positive_int();
  if (static_cast<std::int64_t>(out.stage_micro_batch) * out.num_micro_batches != scenario.training.global_batch_size)
    detail.required("num_micro_batches")
        .fail(fmt::format("micro-batches of {} samples making the global batch of {}", out.stage_micro_batch,
                          scenario.training.global_batch_size));
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
  Scenario space_scenario = scenario;
  space_scenario.search = every_layer_strategy(scenario);
  const std::vector<LayerStrategy> space =
      layer_strategy_space(space_scenario, out.pipeline_stages, out.stage_micro_batch);
  const JsonReader list = detail.required("layers");
  for (const JsonReader& entry : list.non_empty_elements()) {
    entry.expect_object();
    entry.only_keys({"layout", "group_size", "zero_stage", "recompute"});
    LayerStrategy s;
    s.layout.ulysses = entry.required("layout").one_of({"tensor", "ulysses"}, "layer layout") == "ulysses";
    s.layout.group = entry.required("group_size").positive_int();
    s.zero_stage = static_cast<int>(entry.required("zero_stage").integer(0, 3));
    s.recompute = *recompute_from_string(entry.required("recompute").one_of(recompute_names(), "recompute"));
    if (std::find(space.begin(), space.end(), s) == space.end())
      entry.fail(fmt::format("a layer strategy a stage of {} GPUs can run with {} samples per micro-batch",
                             gpus / out.pipeline_stages, out.stage_micro_batch));
    out.layers.push_back(s);
  }
  if (static_cast<int>(out.layers.size()) != scenario.model.num_layers)
    list.fail(fmt::format("one entry per layer ({})", scenario.model.num_layers));
  return out;
}

PerLayerPlan read_per_layer_plan(const Plan& plan, const std::string& source) {
  const JsonReader family = JsonReader(plan.document, source).required("family_plan");
  const Scenario& scenario = plan.scenario;
  const PerLayerPlan out = read_per_layer_detail(family.required("detail"), scenario);
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

PerLayerPlan pinned_per_layer_plan(const Scenario& scenario) {
  const Scenario::PinnedPlan& pin = scenario.per_layer_plan.value();
  const nlohmann::json document = nlohmann::json::parse(pin.json);
  const JsonReader detail(document, scenario.source, pin.at);
  if (scenario.model.is_moe() || scenario.model.mla.enabled() || scenario.model.mtp_num_layers > 0 ||
      scenario.cluster.node_groups.size() != 1)
    detail.fail_plain("a per-layer plan needs a dense model without multi-latent attention or multi-token prediction "
                      "on one kind of GPU");
  return read_per_layer_detail(detail, scenario);
}

}  // namespace twin
