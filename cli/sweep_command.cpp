// `twin sweep`: the scenario's sweep section, one simulation per point, and the scaling report.
#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/simulate_settings.hpp"
#include "core/scenario_input.hpp"
#include "core/scenario_sweep.hpp"
#include "core/units.hpp"
#include "pipeline/sweep_run.hpp"

namespace twin {

void add_sweep_command(CLI::App& app, SweepOptions& options) {
  CLI::App* sub = app.add_subcommand(
      "sweep",
      "Simulate the scenario at every point of its \"sweep\" section (nodes, global_batch_size, seq_length,\n"
      "gpu: every combination of the lists given, at most 64 points and 20000 candidates that fit memory\n"
      "in all) as twin simulate does, and compare the points. Writes into --out:\n"
      "  scaling.csv   per point: the best strategy, iteration time, tokens/s (per GPU), MFU, memory, cost\n"
      "  scaling.html  the same as a table and a chart of tokens/s per GPU, one self-contained page\n"
      "  points/<point>/  each point's ranking.csv, report.html, best.json, megatron_args.txt, traces/");
  sub->add_option("scenario", options.scenario, "Scenario JSON with a \"sweep\" section (see DESIGN.md)")->required();
  sub->add_option("--profile", options.profile, "Performance profile, as for twin simulate")->capture_default_str();
  sub->add_option("--out", options.out, "Output folder (created if missing)")->capture_default_str();
  sub->add_option("--top", options.top, "Write Chrome traces of each point's K fastest strategies")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  sub->add_option("--jobs", options.jobs, "Threads that simulate candidates (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  sub->add_flag("--quiet", options.quiet, "Print only errors, warnings and the final summary");
  sub->add_flag("--exhaustive", options.exhaustive, "Simulate every feasible candidate of each point (as twin simulate)");
  sub->add_flag("--full-replay", options.full_replay, "Replay every candidate's whole iteration (as twin simulate)");
  sub->add_flag("--scale-profile", options.scale_profile,
                "Price GPUs the profile does not describe from another GPU's measurements (as twin simulate)");
}

int run_sweep(const SweepOptions& options) {
  const ScenarioInput input = load_scenario_input(options.scenario);
  const SimulateSettings settings = simulate_settings(options);
  const auto on_point = [&](std::size_t i, std::size_t n, const std::string& label) {
    if (!options.quiet) spdlog::info("sweep point {}/{}: {}", i + 1, n, label);
  };
  const SweepOutcome outcome = sweep_scenario(input, settings, on_point);
  for (const ScalingRow& row : outcome.rows) {
    std::string label;
    for (const auto& [field, value] : row.values) label += (label.empty() ? "" : " ") + field + "=" + value;
    if (!row.best) {
      std::printf("%s: %s\n", label.c_str(), row.note.c_str());
      continue;
    }
    const Throughput& t = row.best->throughput;
    std::printf("%s: %d GPUs, best %s, %.0f tokens/s (%.0f per GPU), MFU %.1f%%, peak memory %.1f GiB", label.c_str(),
                row.gpus, row.best->key().c_str(), t.tokens_per_s, t.tokens_per_s / row.gpus, 100 * t.mfu,
                row.best->memory.peak_bytes() / kGiB);
    if (row.cost) std::printf(", %.3f %s per million tokens", row.cost->cost_per_million_tokens, input.cost->currency.c_str());
    std::printf("\n");
  }
  std::printf("wrote %s/{scaling.csv,scaling.html,points/}\n", outcome.out.string().c_str());
  const bool any_feasible =
      std::any_of(outcome.rows.begin(), outcome.rows.end(), [](const ScalingRow& row) { return row.best.has_value(); });
  if (!any_feasible) spdlog::error("{}: no point of the sweep has a feasible strategy", input.scenario.source);
  return any_feasible ? 0 : 1;
}

}  // namespace twin
