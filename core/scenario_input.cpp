#include "core/scenario_input.hpp"

#include "core/input_file.hpp"
#include "core/json_reader.hpp"

namespace twin {

ScenarioInput read_scenario_input(nlohmann::json document, const std::string& source) {
  ScenarioInput input;
  input.scenario = parse_scenario(document, source);  // checks cost and sweep too
  const JsonReader root(document, source);
  input.cost = parse_cost_section(root, input.scenario.cluster);
  input.sweep = parse_sweep_section(root);
  input.document = std::move(document);
  return input;
}

ScenarioInput load_scenario_input(const std::filesystem::path& path) {
  const std::string source = path.string();
  return read_scenario_input(parse_input_json(read_input_file(path, "a readable scenario JSON"), source), source);
}

}  // namespace twin
