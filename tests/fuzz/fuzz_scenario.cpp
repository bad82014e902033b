// libFuzzer target: any byte string fed to the scenario parser must either parse, and then survive the
// to_json round trip unchanged, or throw InputError. Any other exception, or a crash, is a bug. A scenario that
// parses with a sweep section has its points built and parsed too (twin sweep's reading, core/scenario_input.hpp).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "core/input_file.hpp"
#include "core/scenario_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const twin::Scenario scenario = twin::parse_scenario_text(text, "fuzz.json");
    const twin::Scenario again = twin::parse_scenario(twin::to_json(scenario), "fuzz.json");
    if (!(again == scenario)) {
      std::fprintf(stderr, "round trip changed the scenario:\n%s\n", twin::to_json(scenario).dump(2).c_str());
      std::abort();
    }
    const twin::ScenarioInput input = twin::read_scenario_input(twin::parse_input_json(text, "fuzz.json"), "fuzz.json");
    if (input.sweep)
      for (const twin::SweepPoint& point : twin::sweep_points(input.document, *input.sweep))
        twin::read_scenario_input(point.document, "fuzz.json");
  } catch (const twin::InputError&) {
    // the expected outcome for bad input
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parse_scenario_text threw a non-InputError: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "parse_scenario_text threw a non-exception\n");
    std::abort();
  }
  return 0;
}
