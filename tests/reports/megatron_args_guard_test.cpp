// The guard of megatron_args.txt: for every shipped scenario, every valid uniform strategy's arguments (so the
// winner's, whichever it is) are flags Megatron-LM accepts with values of their type and choices
// (core/megatron_flags.hpp, read at kMegatronCommit), break none of validate_args's rules under the environment
// the "Use:" line sets, and read back (core/megatron_scenario.hpp) into a scenario whose arguments are the same.
// Scenarios are enumerated, not simulated: every candidate is checked in well under a second.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/megatron_command_line.hpp"
#include "core/megatron_scenario.hpp"
#include "core/scenario.hpp"
#include "reports/megatron_args.hpp"
#include "strategies/search.hpp"
#include "tests/reports/megatron_args_fixture.hpp"

namespace twin {
namespace {

std::vector<std::filesystem::path> shipped_scenarios() {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TWIN_SOURCE_DIR) + "/scenarios"))
    if (entry.path().extension() == ".json") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  return paths;
}

// The argument lines and the "Use:" line: what a launch takes from the file.
std::string launched_part(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("#", 0) != 0 || line.rfind("# Use:", 0) == 0) out += line + "\n";
  return out;
}

// CUDA_DEVICE_MAX_CONNECTIONS as the "Use:" line sets it (nullopt: unset).
std::optional<std::string> device_max_connections(const std::string& text) {
  const std::string set = "# Use: CUDA_DEVICE_MAX_CONNECTIONS=";
  const std::size_t at = text.find(set);
  if (at == std::string::npos) return std::nullopt;
  return text.substr(at + set.size(), text.find(' ', at + set.size()) - at - set.size());
}

// The failures of one file, as lines: a flag not in the table, a value argparse refuses, a rule broken.
std::string flag_failures(const std::string& text, long long world_size, const std::string& what) {
  std::string failures;
  const MegatronCommandLine command = parse_megatron_command_line(text, what);
  for (const MegatronArgument& argument : command.arguments) {
    if (!find_megatron_flag(argument.flag)) failures += what + ": " + argument.flag + " is not in the table\n";
    if (auto error = megatron_value_error(argument)) failures += what + ": " + argument.flag + ": " + *error + "\n";
  }
  if (auto broken =
          megatron_rule_broken(MegatronArguments(command.arguments), world_size, device_max_connections(text)))
    failures += what + ": " + *broken + "\n";
  return failures;
}


TEST(MegatronArgsGuard, EveryShippedStrategyLaunchesAndReadsBack) {
  int checked = 0, scenarios = 0;
  for (const std::filesystem::path& path : shipped_scenarios()) {
    const Scenario scenario = load_scenario(path);
    bool any = false;
    for (const Candidate& candidate : enumerate_candidates(scenario)) {
      if (candidate.plan || !candidate.infeasible_reason.empty()) continue;
      const std::string what = path.filename().string() + " " + candidate.key();
      const std::string text = megatron_args(scenario, candidate.strategy);
      const std::string failures = flag_failures(text, candidate.strategy.world_size(), what);
      EXPECT_TRUE(failures.empty()) << failures << text;
      const MegatronScenario read =
          scenario_from_megatron_command_line(scenario, parse_megatron_command_line(text, what), what);
      const std::string again = megatron_args(read.scenario, testing::pinned(read.scenario));
      EXPECT_EQ(launched_part(again), launched_part(text)) << what;
      if (!failures.empty() || launched_part(again) != launched_part(text)) return;  // one file's story is enough
      ++checked;
      any = true;
    }
    scenarios += any;
  }
  std::printf(
      "megatron_args.txt of %d strategies of %d shipped scenarios: every flag in the table, no rule broken, "
      "read back to the same arguments\n",
      checked, scenarios);
  EXPECT_GE(scenarios, 20);
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace twin
