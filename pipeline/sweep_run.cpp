// A point's run folder is written inside the sweep's staging folder, so the sweep publishes all or nothing.
#include "pipeline/sweep_run.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/output_folder.hpp"

namespace twin {
namespace {

struct ParsedPoint {
  SweepPoint point;
  ScenarioInput input;
};

// Every point parsed as a scenario of its own; an error names the point, with the JSON path the field has in the file.
std::vector<ParsedPoint> parse_points(const ScenarioInput& input) {
  std::vector<ParsedPoint> parsed;
  for (SweepPoint& point : sweep_points(input.document, *input.sweep)) {
    try {
      ScenarioInput point_input = read_scenario_input(point.document, input.scenario.source);
      parsed.push_back({std::move(point), std::move(point_input)});
    } catch (const InputError& error) {
      throw InputError(error.file(), error.json_path(), "at sweep point " + point.label + ": " + error.expected());
    }
  }
  return parsed;
}

// Refuses a sweep whose candidates that fit memory, over all points, exceed kMaxSweepCandidates, with the estimate.
void check_sweep_work(const ScenarioInput& input, const std::vector<ParsedPoint>& points) {
  std::size_t total = 0, largest = 0;
  std::string largest_label;
  for (const ParsedPoint& p : points) {
    const std::vector<Candidate> candidates = enumerate_candidates(p.input.scenario);
    const auto fitting = static_cast<std::size_t>(
        std::count_if(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.feasible; }));
    total += fitting;
    if (fitting > largest) largest = fitting, largest_label = p.point.label;
  }
  if (total <= kMaxSweepCandidates) return;
  throw InputError(input.scenario.source, "/sweep",
                   fmt::format("expected a sweep of at most {} candidates to simulate in all (those that fit memory, "
                               "summed over the points), got {} over {} points (the most, {}, at {}): fewer points or "
                               "a narrower search",
                               kMaxSweepCandidates, total, points.size(), largest, largest_label));
}

ScalingRow scaling_row(const ParsedPoint& p, const SimulateOutcome& outcome) {
  ScalingRow row;
  row.values = p.point.values;
  row.folder = p.point.folder;
  row.gpus = p.input.scenario.cluster.total_gpus();
  row.candidates = outcome.ranked.size();
  row.feasible = outcome.feasible + outcome.pruned;  // valid and within memory: simulated or pruned by the bound
  if (!outcome.no_feasible_message.empty()) {
    row.note = "no feasible strategy (every candidate's reason in its infeasible.csv)";
    return row;
  }
  row.best = outcome.best;
  for (ClassResult& c : row.best->result.classes) c.op_timings = {};  // the row needs the figures only
  if (p.input.cost) row.cost = training_cost(*p.input.cost, p.input.scenario.cluster, outcome.best);
  return row;
}

}  // namespace

SweepOutcome sweep_scenario(const ScenarioInput& input, const SimulateSettings& settings,
                            const std::function<void(std::size_t, std::size_t, const std::string&)>& on_point) {
  if (!input.sweep)
    throw InputError(input.scenario.source, "",
                     "expected a \"sweep\" section (e.g. \"sweep\": {\"nodes\": [1, 2, 4]}) for twin sweep");
  const std::vector<ParsedPoint> points = parse_points(input);
  check_sweep_work(input, points);

  OutputFolder folder(settings.out, {"scaling.csv", "scaling.html", "points"});
  SweepOutcome outcome;
  outcome.out = folder.out();
  for (const auto& [field, value] : points.front().point.values) outcome.fields.push_back(field);
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (on_point) on_point(i, points.size(), points[i].point.label);
    SimulateSettings point_settings = settings;
    point_settings.out = folder.staged("points") / points[i].point.folder;
    point_settings.plan_key.clear();  // a key names a candidate of one point
    outcome.rows.push_back(scaling_row(points[i], simulate_scenario(points[i].input, point_settings)));
  }
  const CostConfig* cost = input.cost ? &*input.cost : nullptr;
  write_file_atomically(folder.staged("scaling.csv"), scaling_csv(outcome.fields, outcome.rows, cost));
  write_file_atomically(folder.staged("scaling.html"),
                        scaling_html(input.scenario.name, outcome.fields, outcome.rows, cost));
  folder.publish();
  return outcome;
}

}  // namespace twin
