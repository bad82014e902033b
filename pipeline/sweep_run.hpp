// `twin sweep`: the scenario at every point of its "sweep" section (core/scenario_sweep.hpp), each simulated as
// `twin simulate` does into OUT/points/<point>/, then the scaling report (OUT/scaling.csv, OUT/scaling.html). Every
// point is parsed and the sweep's work estimated before anything is simulated; OUT's outputs are published together
// at the end, so an interrupted or failed sweep leaves the previous ones as they were.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/scenario_input.hpp"
#include "pipeline/simulate_run.hpp"
#include "reports/scaling_report.hpp"

namespace twin {

// The estimated work: candidates that fit memory, summed over the points (each is simulated unless pruned).
inline constexpr std::size_t kMaxSweepCandidates = 20000;

struct SweepOutcome {
  std::vector<std::string> fields;  // the swept fields
  std::vector<ScalingRow> rows;     // one per point, in sweep order
  std::filesystem::path out;
};

// `settings` as for one simulation (plan_key must be empty; out is the sweep's folder). `on_point(i, n, label)` is
// called before point i of n is simulated. Throws InputError: no sweep section; a point that is not a valid
// scenario (the message names the point); an estimate beyond kMaxSweepCandidates (the message gives it).
SweepOutcome sweep_scenario(const ScenarioInput& input, const SimulateSettings& settings,
                            const std::function<void(std::size_t, std::size_t, const std::string&)>& on_point = {});

}  // namespace twin
