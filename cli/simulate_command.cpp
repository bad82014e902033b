// `twin simulate`: load, search, write the run folder (ranking.csv, report.html, best.json, traces/).
#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/search_processes.hpp"
#include "cli/search_progress.hpp"
#include "cli/simulate_settings.hpp"
#include "core/error_line.hpp"
#include "core/megatron_scenario.hpp"
#include "core/scenario_input.hpp"

namespace twin {

void add_simulate_command(CLI::App& app, SimulateOptions& options) {
  CLI::App* sub = app.add_subcommand(
      "simulate",
      "Enumerate the scenario's strategies (or take its pinned one), simulate each feasible one as a\n"
      "discrete-event replay of its op graphs, and rank them by throughput. Writes into --out:\n"
      "  ranking.csv   every candidate, feasible or not (with the reason), times, MFU/HFU, memory;\n"
      "                without --exhaustive, the pruned ones (not simulated) after the simulated\n"
      "  report.html   one self-contained page: ranking, timeline, memory and time breakdowns\n"
      "  best.json     the winning plan, for `twin execute --plan`\n"
      "  megatron_args.txt  the winner as Megatron-LM pretrain_gpt.py arguments ('#' lines: what it cannot express)\n"
      "  traces/       Chrome/Perfetto timelines of the top K strategies (pid = rank, tid = stream)");
  sub->add_option("scenario", options.scenario, "Scenario JSON (see scenarios/ and DESIGN.md)")->required();
  sub->add_option("--profile", options.profile,
                  "Performance profile: 'builtin' (H100, H200: kernel times measured on one GPU by twin calibrate\n"
                  "and PyTorch, times an in-training factor fitted on published runs; A100 and others: published\n"
                  "benchmarks; docs/PROFILES.md names every source), a shipped measured profile (h200-x1, h200-x2,\n"
                  "h200-x4, h100-x1), or a JSON file from `twin calibrate`. Default: the scenario's \"profile\" field");
  sub->add_option("--out", options.out, "Output folder (created if missing)")->capture_default_str();
  sub->add_option("--top", options.top, "Write Chrome traces of the K fastest strategies")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  sub->add_option("--jobs", options.jobs, "Threads that simulate candidates (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  sub->add_flag("--quiet", options.quiet,
                "Print only errors, warnings and the final summary; a search still simulating after 10 s says once,\n"
                "on stderr, how far it is and about how long the rest takes");
  sub->add_option("--plan-key", options.plan_key,
                  "Write best.json, megatron_args.txt and the report's plan for the simulated candidate of this\n"
                  "key (ranking.csv's strategy column) instead of the fastest, e.g. to run the best static plan\n"
                  "beside a hot-switching winner");
  sub->add_flag("--exhaustive", options.exhaustive,
                "Simulate every feasible candidate. Without it the search simulates in order of a lower bound\n"
                "(each candidate's compute and the communication it must wait through) and skips those whose bound is slower than the 10th fastest\n"
                "(or K-th, with --top K > 10) simulated: the top ranks are the same, the rest say \"not simulated\"");
  sub->add_flag("--full-replay", options.full_replay,
                "Replay every candidate's whole iteration. Without it a pipeline with at least 7.5x as many\n"
                "micro-batches as stages (GPipe, 1F1B, interleaved) is replayed at 1x and 4x its depth (2x and\n"
                "3x interleaved) and its steady state extrapolated (iteration within 0.1% of the whole replay; ranking.csv's replay\n"
                "column says which); the top K, best.json and traces are always replayed whole");
  sub->add_option("--megatron-args", options.megatron_args,
                  "A Megatron-LM command line (pretrain_gpt.py's arguments as launched, or a megatron_args.txt):\n"
                  "the run's model, batch, framework switches and parallel strategy, simulated on the scenario's\n"
                  "cluster; what twin does not model is listed in --out's megatron_args_not_modelled.txt");
  sub->add_option("--trace-format", options.trace_format,
                  "json, or json.gz: the traces gzip-compressed (a tenth of the size or less; Perfetto and\n"
                  "chrome://tracing open them as they are)")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "json.gz"}));
  sub->add_flag("--scale-profile", options.scale_profile,
                "Price a GPU the profile does not describe from another GPU's measurements, scaled by their\n"
                "datasheet ratios (bf16 peak, HBM bandwidth); without it such a GPU is an error");
}

int run_simulate(const SimulateOptions& options) {
  auto started = std::chrono::steady_clock::now();
  ScenarioInput input = load_scenario_input(options.scenario);
  SimulateSettings settings = simulate_settings(options);
  settings.plan_key = options.plan_key;
  settings.trace_format = options.trace_format;
  if (!options.megatron_args.empty()) {
    MegatronScenario read = load_megatron_args(input.scenario, options.megatron_args);
    input.scenario = std::move(read.scenario);
    settings.megatron_args = options.megatron_args;
    settings.megatron_not_modelled = std::move(read.not_modelled);
  }
  // Under mpirun or srun each process simulates a share of the candidates; the first writes the outputs.
  const SearchProcessGroup group;
  settings.processes = group.processes();
  settings.on_search_failure = [&](const std::string& what) { group.stop_all_on_failure(what); };
  if (!group.writes_outputs()) {
    SearchProgress quiet(true);
    settings.quiet = true;
    settings.progress = [&](int done, int total) { quiet(done, total); };
    run_search(prepare_scenario(input.scenario, settings), settings);
    return 0;
  }
  auto progress = std::make_unique<SearchProgress>(options.quiet);  // until the outputs are written
  settings.progress = [&](int done, int total) { (*progress)(done, total); };
  const SimulateOutcome outcome = simulate_scenario(input, settings);
  progress.reset();
  if (!outcome.no_feasible_message.empty()) {
    spdlog::error("{}", printable_line(outcome.no_feasible_message));
    return 1;
  }

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const Candidate& best = outcome.best;
  const Throughput& t = best.throughput;
  const char* name = outcome.scenario.name.c_str();
  if (outcome.pruned == 0)
    std::printf("%s: %zu candidates, %zu feasible, simulated in %.2f s\n", name, outcome.ranked.size(),
                outcome.feasible, seconds);
  else
    std::printf("%s: %zu candidates, %zu feasible, %zu simulated (the rest pruned by a lower bound) in %.2f s\n",
                name, outcome.ranked.size(), outcome.feasible + outcome.pruned, outcome.feasible, seconds);
  std::printf("%s: %s\n  iteration %.3f s, %.0f tokens/s, MFU %.1f%%, HFU %.1f%%, peak memory %.1f GiB\n",
              outcome.chosen == 0 ? "best" : "plan (--plan-key)", best.key().c_str(), t.iteration_s, t.tokens_per_s,
              100 * t.mfu, 100 * t.hfu, best.memory.peak_bytes() / kGiB);
  std::printf("wrote %s/{ranking.csv,report.html,best.json,megatron_args.txt,traces/}\n", outcome.out.string().c_str());
  return 0;
}

}  // namespace twin
