// `twin simulate`: load, search, write the run folder (ranking.csv, report.html, best.json, traces/).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cost/profile.hpp"
#include "cli/commands.hpp"
#include "cli/search_processes.hpp"
#include "cli/search_progress.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/error_line.hpp"
#include "core/megatron_scenario.hpp"
#include "core/output_folder.hpp"
#include "core/scenario.hpp"
#include "reports/best_plan.hpp"
#include "reports/html_report.hpp"
#include "reports/megatron_args.hpp"
#include "reports/ranking_csv.hpp"
#include "strategies/families/families.hpp"
#include "strategies/search.hpp"
#include "strategies/validity.hpp"
#include "traces/chrome_trace.hpp"

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
                "Replay every candidate's whole iteration. Without it a pipeline with at least 4.5x as many\n"
                "micro-batches as stages (GPipe, 1F1B; 7.5x interleaved) is replayed at 1x and 2x its depth (2x and\n"
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

namespace {

// What --megatron-args held that twin does not model, one part per line.
const char* const kNotModelledFile = "megatron_args_not_modelled.txt";

// "top<k>_<the plan's key, cut to 60 characters>_<8 hex digits of its hash>.<format>": short enough for any
// file system however long the plan (the whole key is inside the trace), and distinct per plan.
std::string trace_file_name(int k, const std::string& key, const std::string& format) {
  std::string readable = key.substr(0, 60);
  for (char& c : readable)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  std::uint32_t hash = 2166136261u;  // FNV-1a: the same name on every machine and run
  for (unsigned char c : key) hash = (hash ^ c) * 16777619u;
  return fmt::format("top{}_{}_{:08x}.{}", k, readable, hash, format);
}

// Names the scenario's file and JSON path, and the reasons that ruled the candidates out, most common first.
std::string no_feasible_strategy_message(const Scenario& scenario, const std::vector<Candidate>& ranked,
                                         const std::filesystem::path& csv) {
  if (scenario.strategy || scenario.per_layer_plan)
    return fmt::format("{}: at /strategy: {}", scenario.source, ranked.front().infeasible_reason);
  std::map<std::string, int> count_by_reason;
  for (const Candidate& c : ranked) {
    // "out of memory: 93.1 GiB > 80 GiB on stage 0" and its like differ only in numbers: group by the words.
    std::string reason = c.infeasible_reason.substr(0, c.infeasible_reason.find(':'));
    ++count_by_reason[reason];
  }
  std::vector<std::pair<int, std::string>> common;
  for (const auto& [reason, count] : count_by_reason) common.emplace_back(-count, reason);
  std::sort(common.begin(), common.end());
  std::string reasons;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, common.size()); ++i)
    reasons += fmt::format("{}{} ({}x)", i ? "; " : "", common[i].second, -common[i].first);
  return fmt::format("{}: at /search: no feasible strategy among {} candidates; most common reasons: {}; every "
                     "candidate's reason in {} (the previous outputs are left as they were)",
                     scenario.source, ranked.size(), reasons, csv.string());
}

// The profile --profile names, or else the scenario's "profile". A name the scenario gives that names no readable
// profile is an error at the scenario's /profile (an error inside a profile file names its own path).
Profile run_profile(const Scenario& scenario, const std::string& option) {
  if (!option.empty()) return load_profile(option);
  try {
    return load_profile(scenario.profile);
  } catch (const InputError& error) {
    if (!error.json_path().empty()) throw;
    throw InputError(scenario.source, "/profile", error.what());
  }
}

// The rank of the simulated candidate whose key is `plan_key`; the error lists the fastest keys, since the folder
// keeps the previous run's ranking.csv.
std::size_t plan_key_index(const std::vector<Candidate>& ranked, const std::string& plan_key,
                           const std::filesystem::path& out) {
  const auto named = std::find_if(ranked.begin(), ranked.end(),
                                  [&](const Candidate& c) { return c.feasible && c.key() == plan_key; });
  if (named != ranked.end()) return static_cast<std::size_t>(named - ranked.begin());
  std::string fastest;
  for (std::size_t k = 0; k < std::min<std::size_t>(3, ranked.size()) && ranked[k].feasible; ++k)
    fastest += fmt::format("{}\"{}\"", k ? ", " : "", ranked[k].key());
  throw InputError("--plan-key", "",
                   fmt::format("expected the key of a simulated candidate (the fastest: {}; pruned ones are not simulated: add "
                               "--exhaustive), got \"{}\"; {} is left as it was",
                               fastest, plan_key, out.string()));
}

}  // namespace

int run_simulate(const SimulateOptions& options) {
  auto started = std::chrono::steady_clock::now();
  Scenario scenario = load_scenario(options.scenario);
  std::vector<std::string> not_modelled;
  if (!options.megatron_args.empty()) {
    MegatronScenario read = load_megatron_args(scenario, options.megatron_args);
    scenario = std::move(read.scenario);
    not_modelled = std::move(read.not_modelled);
  }
  check_pinned_family_plan(scenario);
  Profile loaded = run_profile(scenario, options.profile);
  if (!options.profile.empty()) scenario.profile = options.profile;
  scenario.profile_scaling = scenario.profile_scaling || options.scale_profile;
  std::vector<std::string> scaled;
  Profile profile = profile_for_cluster(std::move(loaded), scenario.cluster, scenario.profile_scaling,
                                        scenario.source, "", &scaled);
  for (const std::string& line : scaled) spdlog::warn("{}", line);
  // Which workload the prediction is for: the profile's times are one framework's kernels on its GPUs.
  scenario.profile_workload = profile_workload(profile);
  scenario.profile_framework = profile.framework;
  if (!options.quiet)
    spdlog::info("workload: {} training, priced with profile {} ({})",
                 scenario.framework.name ? to_string(*scenario.framework.name) : "the scenario names no framework:",
                 scenario.profile, scenario.profile_workload);
  if (const std::string warning = framework_mismatch(scenario.framework.name, profile.framework); !warning.empty())
    spdlog::warn("{}", warning);
  // An MoE scenario that sets no routing imbalance takes the one its profile measured (twin calibrate
  // --from-trace of an MoE run); the plans written carry it, so that they say what was simulated.
  MoeConfig& moe = scenario.model.moe;
  if (scenario.model.is_moe() && !moe.routing_imbalance)
    if (const MoeRouting* measured = profile.routing_for(moe.num_experts, moe.top_k)) {
      moe.routing_imbalance = measured->routing_imbalance();
      spdlog::info("model.moe.routing_imbalance {:.3f}: measured for {} experts, top-{} ({} run(s) in the profile)",
                   *moe.routing_imbalance, moe.num_experts, moe.top_k, measured->runs.size());
    }

  // Under mpirun or srun each process simulates a share of the candidates; the first writes the outputs.
  // A failure in one process stops them all: the others would wait for its share forever.
  const SearchProcessGroup group;
  const auto search_share = [&](SearchProgress& progress) {
    try {
      SearchOptions search_options{options.jobs, [&](int done, int total) { progress(done, total); },
                                   group.processes()};
      search_options.exhaustive = options.exhaustive;
      search_options.full_replay = options.full_replay;
      search_options.whole_top = std::max(1, options.top);  // the winner and the traced K: whole replays
      search_options.exact_top = std::max(kExactTop, options.top);
      return search(scenario, profile, plan_families(), search_options);
    } catch (const std::exception& e) {
      group.stop_all_on_failure(e.what());
      throw;
    }
  };
  if (!group.writes_outputs()) {
    SearchProgress quiet(true);
    search_share(quiet);
    return 0;
  }

  // Before the search: a folder that cannot be written is known at once, not after minutes.
  // infeasible.csv is a failed run's (nothing feasible): a run that succeeds removes it with the other outputs.
  OutputFolder folder(options.out, {"ranking.csv", "report.html", "best.json", "megatron_args.txt", "traces",
                                    kNotModelledFile, "infeasible.csv"});
  const std::filesystem::path out = folder.out();
  if (!not_modelled.empty()) {
    std::string lines;
    for (const std::string& line : not_modelled) lines += line + "\n";
    write_file_atomically(folder.staged(kNotModelledFile), lines);
    spdlog::warn("{}: {} part(s) of the command line are not modelled, listed in {}", options.megatron_args,
                 not_modelled.size(), (out / kNotModelledFile).string());
  }

  auto progress = std::make_unique<SearchProgress>(options.quiet);  // until the outputs are written
  std::vector<Candidate> ranked = search_share(*progress);
  std::size_t feasible = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.feasible; });

  if (feasible == 0) {  // a failed run: the previous outputs stay; every candidate's reason in infeasible.csv
    write_file_atomically(out / "infeasible.csv", ranking_csv(scenario, ranked));
    spdlog::error("{}", printable_line(no_feasible_strategy_message(scenario, ranked, out / "infeasible.csv")));
    return 1;
  }

  // The plan best.json holds: the fastest, or the candidate --plan-key names (simulated, not pruned). Checked
  // before anything is written: a run that fails leaves the previous outputs as they were.
  const std::size_t chosen = options.plan_key.empty() ? 0 : plan_key_index(ranked, options.plan_key, out);
  // A plan and traces need the whole graph: one beyond the op limit (its steady state ranked it) has neither. Checked
  // before anything is published, like the key: the previous outputs stay as they were.
  if (!ranked[chosen].plan) {
    if (auto too_large = whole_graph_too_large(scenario, ranked[chosen].strategy)) {
      throw InputError(options.scenario, "/training/global_batch_size",
                       fmt::format("a batch whose fastest candidate can be written as a plan: {}: {} (its iteration, "
                                   "extrapolated from its steady state: {:.3f} s), so best.json and its traces cannot be "
                                   "written (--plan-key another candidate, or a larger micro_batch_size)",
                                   ranked[chosen].key(), *too_large, ranked[chosen].result.iteration_ns * 1e-9));
    }
  }
  std::filesystem::create_directories(folder.staged("traces"));
  // The best and the top K again, with every op's timing recorded, for the report, plan and traces.
  int traced = std::min<int>(options.top, static_cast<int>(feasible));
  IterationGraph best_graph;
  Candidate best;
  if (chosen >= static_cast<std::size_t>(std::max(1, traced))) {
    best = evaluate_again(scenario, profile, ranked[chosen], true, &best_graph);
    best.memory = ranked[chosen].memory;
    // Beyond the top K its row may hold a steady-state extrapolation: show the whole replay best.json holds.
    ranked[chosen].result = best.result;
    for (ClassResult& c : ranked[chosen].result.classes) c.op_timings = {};  // best holds them
    ranked[chosen].throughput = best.throughput;
  }
  // The report's side-by-side: the first plans traced, on the time axis of the slowest of them.
  const int compared_count = std::min(std::max(1, traced), kComparedPlans);
  TimeNs compared_axis_end_ns = 0;
  for (int k = 0; k < compared_count; ++k)
    compared_axis_end_ns = std::max(compared_axis_end_ns, ranked[k].result.iteration_ns);
  std::vector<ComparedPlan> compared;
  for (int k = 0; k < std::max(1, traced); ++k) {
    const std::string key = ranked[k].key();
    if (!ranked[k].plan && whole_graph_too_large(scenario, ranked[k].strategy)) {
      spdlog::warn("{}: no trace, its whole op graph is beyond the op limit (ranked by its steady state)", key);
      continue;
    }
    IterationGraph graph;
    Candidate detailed = evaluate_again(scenario, profile, ranked[k], true, &graph);
    if (k < traced) {
      write_chrome_trace(folder.staged("traces") / trace_file_name(k + 1, key, options.trace_format), graph, detailed.result,
                         scenario.name + " | " + key);
    }
    if (k < compared_count) {
      compared.push_back(compare_plan(k + 1, detailed, graph, compared_axis_end_ns));
      compared.back().candidate.memory = ranked[k].memory;
    }
    if (static_cast<std::size_t>(k) == chosen) {
      best = std::move(detailed);
      best.memory = ranked[chosen].memory;
      best_graph = std::move(graph);
    }
  }
  write_file_atomically(folder.staged("ranking.csv"), ranking_csv(scenario, ranked));
  write_best_plan(folder.staged("best.json"), scenario, best, best_graph);  // one op per line
  write_file_atomically(folder.staged("megatron_args.txt"), megatron_args(scenario, best));
  write_file_atomically(folder.staged("report.html"), html_report(scenario, ranked, best_graph, best, compared));
  folder.publish();
  progress.reset();

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const Throughput& t = best.throughput;
  const std::size_t pruned = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.pruned; });
  if (pruned == 0)
    std::printf("%s: %zu candidates, %zu feasible, simulated in %.2f s\n", scenario.name.c_str(), ranked.size(),
                feasible, seconds);
  else
    std::printf("%s: %zu candidates, %zu feasible, %zu simulated (the rest pruned by a lower bound) in %.2f s\n",
                scenario.name.c_str(), ranked.size(), feasible + pruned, feasible, seconds);
  std::printf("%s: %s\n  iteration %.3f s, %.0f tokens/s, MFU %.1f%%, HFU %.1f%%, peak memory %.1f GiB\n",
              chosen == 0 ? "best" : "plan (--plan-key)", best.key().c_str(), t.iteration_s, t.tokens_per_s, 100 * t.mfu, 100 * t.hfu,
              best.memory.peak_bytes() / kGiB);
  std::printf("wrote %s/{ranking.csv,report.html,best.json,megatron_args.txt,traces/}\n", out.string().c_str());
  return 0;
}

}  // namespace twin
