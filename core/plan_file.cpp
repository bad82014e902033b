// The plan's strategy pins its scenario, so the scenario parser validates and completes both.
#include "core/plan_file.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {
namespace {

// The member `key` of the plan, read where it is (a missing one is named at its own path).
JsonReader member(const nlohmann::json& document, const char* key, const std::string& source, const char* expected) {
  const std::string path = std::string("/") + key;
  if (!document.contains(key)) throw InputError(source, path, fmt::format("missing: expected {}", expected));
  return JsonReader(document.at(key), source, path);
}

}  // namespace

Plan parse_plan(const nlohmann::json& document, const std::string& source) {
  if (!document.is_object()) throw InputError(source, "", "a twin plan (a JSON object with \"format\": \"twin-plan\")");
  const JsonReader format = member(document, "format", source, "\"twin-plan\"");
  if (format.value() != "twin-plan") format.fail("expected \"twin-plan\"");
  const JsonReader version = member(document, "version", source, "an integer");
  if (!version.value().is_number_integer() || version.value().get<std::int64_t>() != kPlanFormatVersion)  // 2^40+1 is not 1
    version.fail_plain(fmt::format("expected {}, got {} (the plan format version this twin reads)", kPlanFormatVersion,
                                   version.describe_value()));
  const JsonReader lowering = member(document, "lowering_version", source, "an integer");
  if (!lowering.value().is_number_integer() || lowering.value().get<std::int64_t>() != kLoweringVersion)
    lowering.fail_plain(fmt::format("expected {}, got {} (plans of another lowering name other ops: simulate again)",
                                    kLoweringVersion, lowering.describe_value()));
  const JsonReader scenario_reader = member(document, "scenario", source, "the scenario object");
  const JsonReader strategy_reader = member(document, "strategy", source, "the strategy object");
  scenario_reader.expect_object();
  strategy_reader.expect_object();
  const nlohmann::json& scenario_json = scenario_reader.value();
  const nlohmann::json& strategy_json = strategy_reader.value();

  // The plan's strategy pins the scenario, so the scenario parser validates and completes it.
  nlohmann::json pinned = scenario_json;
  pinned.erase("search");
  pinned["strategy"] = strategy_json;
  // A family plan's strategy is its home's (a hot-switching phase's), whose micro-batches count that phase's
  // rows, not the scenario's batch, and whose data-parallel size may count pipelines of other shapes (a
  // heterogeneous plan's): the parser derives both for the scenario; the family plan keeps its own.
  if (const auto family = document.find("family_plan"); family != document.end() && family->is_object()) {
    pinned["strategy"].erase("num_micro_batches");
    pinned["strategy"].erase("data_parallel_size");
  }
  Plan plan;
  try {
    plan.scenario = parse_scenario(pinned, source);
  } catch (const InputError& error) {
    const bool in_strategy = error.json_path().rfind("/strategy", 0) == 0;
    throw InputError(source, (in_strategy ? "" : "/scenario") + error.json_path(), error.expected());
  }
  if (!plan.scenario.strategy) throw InputError(source, "/strategy", "one pinned strategy");
  plan.strategy = *plan.scenario.strategy;
  if (document.contains("profile") && document["profile"].is_string()) plan.profile = document["profile"];
  plan.document = document;
  return plan;
}

Plan read_plan(const std::filesystem::path& path) {
  const nlohmann::json document =
      read_json_file(path.string(), "a readable plan file (best.json from twin simulate)");
  return parse_plan(document, path.string());
}

}  // namespace twin
