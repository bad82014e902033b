// The subcommands of `twin`: their options and what each runs.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace twin {

inline constexpr const char* kTwinVersion = "0.1.0";

struct SimulateOptions {
  std::string scenario;
  std::string profile;     // empty: the scenario's "profile" field
  std::string out = "twin-out";
  int top = 3;
  std::string plan_key;  // best.json of this candidate instead of the fastest
  int jobs = 0;
  bool quiet = false;
  bool scale_profile = false;  // price GPUs the profile does not describe from another's, scaled
  bool exhaustive = false;     // simulate every feasible candidate (no pruning by lower bound)
  bool full_replay = false;    // replay every iteration whole (no steady-state extrapolation)
  std::string megatron_args;   // a Megatron-LM command line: the run's model, training, framework and strategy
  std::string trace_format = "json";  // or "json.gz": the traces gzip-compressed
};

void add_simulate_command(CLI::App& app, SimulateOptions& options);
// Returns the process exit code.
int run_simulate(const SimulateOptions& options);

struct SweepOptions {
  std::string scenario;
  std::string profile;     // empty: the scenario's "profile" field
  std::string out = "twin-sweep";
  int top = 1;             // traces per point
  int jobs = 0;
  bool quiet = false;
  bool scale_profile = false;
  bool exhaustive = false;
  bool full_replay = false;
};

void add_sweep_command(CLI::App& app, SweepOptions& options);
int run_sweep(const SweepOptions& options);

struct ReportOptions {
  std::string run_dir;
  std::string out;         // empty: RUN_DIR/execution_report.html
  std::string plan;        // empty: RUN_DIR/best.json
  int rank = -1;           // the measured timeline's rank; -1: the lowest rank with a trace
};

void add_report_command(CLI::App& app, ReportOptions& options);
int run_report(const ReportOptions& options);

struct ValidateOptions {
  std::string table;
  std::string profile = "builtin";
  std::string out = "twin-validation";
  std::vector<std::string> groups;  // empty: every row
  int jobs = 0;
  std::string fit_family;           // non-empty: fit this family's in-situ prior on `groups` first
  bool cross_validate = false;      // leave one group out (validation/cross_validation.hpp)
  bool scale_profile = false;
  bool full_replay = false;         // replay every iteration whole (no steady-state extrapolation)
};

void add_validate_command(CLI::App& app, ValidateOptions& options);
int run_validate(const ValidateOptions& options);

}  // namespace twin

namespace twin {
struct CalibrateOptions;  // cli/calibrate_command.cpp (every build; measuring GPUs needs CUDA)
// Registers `twin calibrate`; returns the options it fills.
CalibrateOptions& add_calibrate_command(CLI::App& app);
bool calibrate_selected(const CLI::App& app);
int run_calibrate(const CLI::App& app);
}  // namespace twin

#ifdef TWIN_WITH_CUDA
namespace twin {
struct ExecuteOptions;  // cli/execute_command.cpp
ExecuteOptions& add_execute_command(CLI::App& app);
bool execute_selected(const CLI::App& app);
int run_execute(const CLI::App& app);
}  // namespace twin
#endif
