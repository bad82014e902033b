// libFuzzer target for the plan families' details a scenario pins (strategy.per_layer, strategy.hot_switch,
// strategy.pipelines): a scenario that parses is read on as its family's search reads it, which must accept it or
// throw InputError. Any other exception, a crash, a sanitizer report or a hang is a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "strategies/families/families.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const twin::Scenario scenario = twin::parse_scenario_text(text, "fuzz.json");
    twin::check_pinned_family_plan(scenario);
  } catch (const twin::InputError&) {
    // the expected outcome for bad input
  } catch (const std::exception& e) {
    std::fprintf(stderr, "a family plan's reader threw a non-InputError: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "a family plan's reader threw a non-exception\n");
    std::abort();
  }
  return 0;
}
