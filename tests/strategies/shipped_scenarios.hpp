// The shipped scenarios (scenarios/*.json) for tests that check a property on all of them, and candidates spread
// over a scenario's enumeration.
#pragma once
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "sim/price_cache.hpp"
#include "strategies/search.hpp"

namespace twin::testing {

// scenarios/*.json, sorted by name.
inline std::vector<std::filesystem::path> shipped_scenario_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(TWIN_SOURCE_DIR) / "scenarios"))
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The profile `twin simulate` uses for the scenario read from `file`.
inline Profile profile_of(const Scenario& scenario, const std::filesystem::path& file) {
  return profile_for_cluster(load_profile(scenario.profile), scenario.cluster, true, file.string(), "");
}

// Up to `count` feasible uniform candidates of the scenario, spread evenly over its enumeration.
inline std::vector<Strategy> spread_candidates(const Scenario& scenario, std::size_t count) {
  std::vector<Strategy> feasible;
  for (const Candidate& c : enumerate_candidates(scenario))
    if (c.feasible) feasible.push_back(c.strategy);
  if (feasible.size() <= count) return feasible;
  std::vector<Strategy> chosen;
  for (std::size_t k = 0; k < count; ++k) chosen.push_back(feasible[k * feasible.size() / count]);
  return chosen;
}

// Calls check(scenario, profile, prices, strategy) on up to `per_scenario` spread candidates of every shipped
// scenario (one price cache per scenario), each under a trace naming the file and the candidate. Returns how many.
template <class Check>
int check_spread_candidates(std::size_t per_scenario, Check check) {
  int checked = 0;
  for (const std::filesystem::path& file : shipped_scenario_files()) {
    SCOPED_TRACE(file.filename().string());
    const Scenario scenario = load_scenario(file.string());
    const Profile profile = profile_of(scenario, file);
    sim::PriceCache prices;
    for (const Strategy& strategy : spread_candidates(scenario, per_scenario)) {
      SCOPED_TRACE(strategy.key());
      check(scenario, profile, prices, strategy);
      ++checked;
    }
  }
  return checked;
}

}  // namespace twin::testing
