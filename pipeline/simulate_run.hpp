// What `twin simulate` does, as library functions: the profile a scenario is priced by, the search, and the run
// folder (ranking.csv, report.html, best.json, megatron_args.txt, traces/) published together. `twin simulate`,
// `twin sweep` and the Python module call them; the command line adds only its options, progress line and summary.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/scenario_input.hpp"
#include "cost/profile.hpp"
#include "strategies/search.hpp"

namespace twin {

struct SimulateSettings {
  std::string profile;           // empty: the scenario's "profile" field
  bool scale_profile = false;    // price GPUs the profile does not describe from another's, scaled
  std::filesystem::path out = "twin-out";
  int top = 3;                   // Chrome traces of the K fastest
  std::string plan_key;          // best.json of this candidate instead of the fastest
  int jobs = 0;                  // 0: every core
  bool exhaustive = false;       // no pruning by lower bound
  bool full_replay = false;      // no steady-state extrapolation
  bool quiet = false;            // no "workload:" line (warnings and errors still)
  std::string trace_format = "json";  // or "json.gz": the traces gzip-compressed
  // What a Megatron-LM command line (core/megatron_scenario.hpp) held that twin does not model, one part per line,
  // and the file it came from: written to megatron_args_not_modelled.txt with the outputs, with one warning.
  std::string megatron_args;
  std::vector<std::string> megatron_not_modelled;
  std::function<void(int done, int total)> progress;  // may be empty
  SearchProcesses processes;     // one process unless mpirun or srun started several (cli/search_processes.hpp)
  std::function<void(const std::string& what)> on_search_failure;  // may be empty; called before the error is thrown
};

// The scenario (a pinned family plan checked) and the profile that prices it: --profile or the scenario's, fitted to
// its cluster, and an MoE model's routing imbalance from the profile where the scenario sets none. Logs (spdlog)
// what it scaled or took, the workload the profile prices, and a warning when it is another framework's.
struct PreparedScenario {
  Scenario scenario;
  Profile profile;
};
PreparedScenario prepare_scenario(Scenario scenario, const SimulateSettings& settings);

// search() with the settings' options: every candidate, ranked.
std::vector<Candidate> run_search(const PreparedScenario& prepared, const SimulateSettings& settings);

struct SimulateOutcome {
  Scenario scenario;             // as simulated (profile and routing imbalance resolved)
  std::vector<Candidate> ranked;
  Candidate best;                // the fastest, or the --plan-key one; empty when nothing is feasible
  std::size_t chosen = 0;        // best's index in `ranked`
  std::size_t feasible = 0, pruned = 0;
  std::filesystem::path out;
  // Non-empty when nothing was feasible: a failed run. The previous outputs stay as they were; every candidate's
  // reason is in infeasible.csv, which the message names.
  std::string no_feasible_message;
};

// Simulates `input` into settings.out: one run at a time in a folder (core/output_folder.hpp), every check before
// anything is published; a run that succeeds removes a previous failed run's infeasible.csv. Throws InputError for bad input (a sweep section included: twin sweep runs those), leaving
// the folder as it was.
SimulateOutcome simulate_scenario(const ScenarioInput& input, const SimulateSettings& settings);

}  // namespace twin
