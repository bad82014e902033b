// Each phase's strategy is validated the way a pinned scenario is: the phase's scenario (its pack length and
// number of packs) with the strategy pinned goes through the scenario parser.
#include "strategies/hot_switch/hot_switch_plan_file.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"

namespace twin {
namespace {

// The phase's strategy completed and validated for `phase_scenario`, errors pointing into the plan file.
Strategy phase_strategy(const Scenario& phase, const JsonReader& fields) {
  fields.expect_object();
  nlohmann::json pinned = to_json(phase);
  pinned.erase("search");
  pinned["strategy"] = fields.value();
  try {
    const Scenario parsed = parse_scenario(pinned, fields.file());
    if (!parsed.strategy) fields.fail("one strategy");
    return *parsed.strategy;
  } catch (const InputError& error) {
    const std::string& path = error.json_path();
    const bool in_strategy = path.rfind("/strategy", 0) == 0;
    throw InputError(fields.file(), fields.path() + (in_strategy ? path.substr(9) : ""),
                     in_strategy ? error.expected()
                                 : fmt::format("a strategy valid for its phase ({}: {})", path, error.expected()));
  }
}

void expect_equal(const JsonReader& phase, std::string_view key, std::int64_t rebuilt) {
  const JsonReader field = phase.required(key);
  if (field.integer(0, std::int64_t{1} << 53) != rebuilt)
    field.fail(fmt::format("{} (what the plan's scenario gives this phase)", rebuilt));
}

}  // namespace

std::vector<HotSwitchPhase> read_hot_switch_phases(const Plan& plan, const std::string& source) {
  return read_hot_switch_detail(JsonReader(plan.document, source).required("family_plan").required("detail"),
                                plan.scenario);
}

std::vector<HotSwitchPhase> pinned_hot_switch_phases(const Scenario& scenario) {
  const Scenario::PinnedPlan& pin = scenario.hot_switch_plan.value();
  const nlohmann::json document = nlohmann::json::parse(pin.json);
  return read_hot_switch_detail(JsonReader(document, scenario.source, pin.at), scenario);
}

std::vector<HotSwitchPhase> read_hot_switch_detail(const JsonReader& detail, const Scenario& scenario) {
  detail.expect_object();
  detail.only_keys({"phases", "home"});  // HotSwitchPlan::to_json's keys
  if (scenario.model.mtp_num_layers > 0)
    detail.fail_plain("a hot-switching plan needs a model without multi-token prediction (its switch units are the "
                      "embedding, the decoder layers and the output layer)");
  const JsonReader phases_json = detail.required("phases");
  const std::vector<SeqLengthCount> batch = batch_sequences(scenario);
  std::vector<HotSwitchPhase> phases;
  std::int64_t previous_end = 0;
  for (const JsonReader& entry : phases_json.non_empty_elements()) {
    entry.expect_object();
    entry.only_keys({"min_length_exclusive", "max_length", "sequences", "tokens", "packs", "padded_packs", "strategy",
                     "strategy_fields", "switch_in"});
    if (const auto switch_in = entry.find("switch_in")) {  // what the plan's writer reports; the lowering rebuilds it
      switch_in->only_keys({"gradients", "transfers", "intra_node_bytes", "inter_node_bytes", "max_received_bytes_per_gpu"});
    }
    const JsonReader low = entry.required("min_length_exclusive");
    if (low.integer(0, std::int64_t{1} << 40) != previous_end)
      low.fail(fmt::format("{} (the phase before ends there)", previous_end));
    const std::int64_t max_length = entry.required("max_length").integer(previous_end + 1, std::int64_t{1} << 40);
    HotSwitchPhase phase;
    phase.workload = pack_range(batch, previous_end, max_length);
    if (phase.workload.empty()) entry.required("max_length").fail("the end of a length range holding sequences");
    expect_equal(entry, "sequences", phase.workload.sequences);
    expect_equal(entry, "tokens", phase.workload.tokens);
    expect_equal(entry, "packs", phase.workload.packs);
    phase.packs = entry.required("padded_packs").integer(phase.workload.packs, std::int64_t{1} << 40);
    phase.strategy = phase_strategy(phase_scenario(scenario, phase.workload, phase.packs),
                                    entry.required("strategy_fields"));
    expect_equal(entry, "padded_packs", padded_packs(phase.workload, phase.strategy));
    const JsonReader key = entry.required("strategy");
    if (key.string() != phase.strategy.key()) key.fail(fmt::format("\"{}\" (its strategy_fields)", phase.strategy.key()));
    previous_end = max_length;
    phases.push_back(std::move(phase));
  }
  if (previous_end != batch.back().length)
    phases_json.fail(fmt::format("phases up to the longest sequence ({} tokens)", batch.back().length));
  if (const auto home = detail.find("home"); home && home->string() != phases.back().strategy.key())
    home->fail(fmt::format("\"{}\" (the last phase's strategy)", phases.back().strategy.key()));
  return phases;
}

}  // namespace twin
