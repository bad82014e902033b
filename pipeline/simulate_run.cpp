// Moved from cli/simulate_command.cpp (2026-11-28) so that the command line and the Python module run one pipeline.
#include "pipeline/simulate_run.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/output_folder.hpp"
#include "pipeline/executable_plans.hpp"
#include "reports/best_plan.hpp"
#include "reports/html_report.hpp"
#include "reports/megatron_args.hpp"
#include "reports/plan_comparison.hpp"
#include "reports/ranking_csv.hpp"
#include "strategies/families/families.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"
#include "traces/chrome_trace.hpp"

namespace twin {
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

// A plan and traces need the whole graph: one beyond the op limit (its steady state ranked it) has neither. Checked
// before anything is published, like the key: the previous outputs stay as they were.
void check_plan_can_be_written(const Scenario& scenario, const Candidate& chosen) {
  if (chosen.plan) return;
  if (auto too_large = whole_graph_too_large(scenario, chosen.strategy))
    throw InputError(scenario.source, "/training/global_batch_size",
                     fmt::format("a batch whose fastest candidate can be written as a plan: {}: {} (its iteration, "
                                 "extrapolated from its steady state: {:.3f} s), so best.json and its traces cannot be "
                                 "written (--plan-key another candidate, or a larger micro_batch_size)",
                                 chosen.key(), *too_large, chosen.result.iteration_ns * 1e-9));
}

// The best and the top K again, with every op's timing recorded, for the report, plan and traces (written into
// `traces` as `trace_format`). Returns the chosen candidate with its op timings and fills `best_graph` and
// `compared` (the report's side-by-side: the first plans, on the time axis of the slowest of them).
Candidate replay_top(const PreparedScenario& run, std::vector<Candidate>& ranked, std::size_t chosen, int traced,
                     const std::filesystem::path& traces, const std::string& trace_format, IterationGraph& best_graph,
                     std::vector<ComparedPlan>& compared) {
  const Scenario& scenario = run.scenario;
  Candidate best;
  if (chosen >= static_cast<std::size_t>(std::max(1, traced))) {
    best = evaluate_again(scenario, run.profile, ranked[chosen], true, &best_graph);
    best.memory = ranked[chosen].memory;
    // Beyond the top K its row may hold a steady-state extrapolation: show the whole replay best.json holds.
    ranked[chosen].result = best.result;
    for (ClassResult& c : ranked[chosen].result.classes) c.op_timings = {};  // best holds them
    ranked[chosen].throughput = best.throughput;
  }
  const int compared_count = std::min(std::max(1, traced), kComparedPlans);
  TimeNs compared_axis_end_ns = 0;
  for (int k = 0; k < compared_count; ++k)
    compared_axis_end_ns = std::max(compared_axis_end_ns, ranked[k].result.iteration_ns);
  for (int k = 0; k < std::max(1, traced); ++k) {
    const std::string key = ranked[k].key();
    if (!ranked[k].plan && whole_graph_too_large(scenario, ranked[k].strategy)) {
      spdlog::warn("{}: no trace, its whole op graph is beyond the op limit (ranked by its steady state)", key);
      continue;
    }
    IterationGraph graph;
    Candidate detailed = evaluate_again(scenario, run.profile, ranked[k], true, &graph);
    if (k < traced)
      write_chrome_trace(traces / trace_file_name(k + 1, key, trace_format), graph, detailed.result,
                         scenario.name + " | " + key);
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
  return best;
}

// The stated assumption behind FP8 GEMM prices (docs/PROFILES.md "FP8 GEMMs"), for the GPUs whose kernel profile
// holds no FP8 GEMM measurement; empty without training.fp8 or where every GPU has them.
std::string fp8_pricing_note(const Scenario& scenario, const Profile& profile) {
  if (!scenario.training.fp8) return {};
  std::string gpus;
  for (const NodeGroup& group : scenario.cluster.node_groups)
    if (profile.kernels_for(group.gpu).measured_fp8_gemms.empty() && gpus.find(group.gpu.name) == std::string::npos)
      gpus += (gpus.empty() ? "" : ", ") + group.gpu.name;
  if (gpus.empty()) return {};
  return "FP8 GEMMs on " + gpus + " priced at the FP8 peak with the BF16 efficiency of their shape (an assumption: "
         "the profile measured no FP8 GEMM)";
}

}  // namespace

PreparedScenario prepare_scenario(Scenario scenario, const SimulateSettings& settings) {
  check_pinned_family_plan(scenario);  // before the profile: a bad plan is the scenario's error, found first
  Profile loaded = run_profile(scenario, settings.profile);
  if (!settings.profile.empty()) scenario.profile = settings.profile;
  scenario.profile_scaling = scenario.profile_scaling || settings.scale_profile;
  std::vector<std::string> scaled;
  Profile profile = profile_for_cluster(std::move(loaded), scenario.cluster, scenario.profile_scaling,
                                        scenario.source, "", &scaled);
  for (const std::string& line : scaled) spdlog::warn("{}", line);
  // Which workload the prediction is for: the profile's times are one framework's kernels on its GPUs.
  scenario.profile_workload = profile_workload(profile);
  if (!scaled.empty())
    scenario.profile_workload += "; GPUs it does not describe priced from another GPU's kernels scaled by datasheet ratios";
  if (const std::string fp8 = fp8_pricing_note(scenario, profile); !fp8.empty()) {
    spdlog::warn("{}", fp8);
    scenario.profile_workload += "; " + fp8;
  }
  scenario.profile_framework = profile.framework;
  if (!settings.quiet)
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
  return {std::move(scenario), std::move(profile)};
}

std::vector<Candidate> run_search(const PreparedScenario& prepared, const SimulateSettings& settings) {
  // Under mpirun or srun a failure in one process must stop them all: the others would wait for its share forever.
  try {
    SearchOptions options{settings.jobs, settings.progress, settings.processes};
    options.exhaustive = settings.exhaustive;
    options.full_replay = settings.full_replay;
    options.whole_top = std::max(1, settings.top);  // the winner and the traced K: whole replays
    options.exact_top = std::max(kExactTop, settings.top);
    return search(prepared.scenario, prepared.profile, plan_families(), options);
  } catch (const std::exception& e) {
    if (settings.on_search_failure) settings.on_search_failure(e.what());
    throw;
  }
}

SimulateOutcome simulate_scenario(const ScenarioInput& input, const SimulateSettings& settings) {
  if (input.sweep)
    throw InputError(input.scenario.source, "/sweep",
                     "expected no sweep section in a single simulation: `twin sweep` (Python: twin.sweep) simulates its "
                     "points");
  const PreparedScenario run = prepare_scenario(input.scenario, settings);
  const CostConfig* cost = input.cost ? &*input.cost : nullptr;
  // Before the search: a folder that cannot be written is known at once, not after minutes.
  // infeasible.csv is a failed run's (nothing feasible): a run that succeeds removes it with the other outputs.
  OutputFolder folder(settings.out, {"ranking.csv", "report.html", "best.json", "megatron_args.txt", "traces",
                                     kNotModelledFile, "infeasible.csv"});
  SimulateOutcome outcome;
  outcome.out = folder.out();
  if (!settings.megatron_not_modelled.empty()) {
    std::string lines;
    for (const std::string& line : settings.megatron_not_modelled) lines += line + "\n";
    write_file_atomically(folder.staged(kNotModelledFile), lines);
    spdlog::warn("{}: {} part(s) of the command line are not modelled, listed in {}", settings.megatron_args,
                 settings.megatron_not_modelled.size(), (outcome.out / kNotModelledFile).string());
  }
  outcome.ranked = run_search(run, settings);
  std::vector<Candidate>& ranked = outcome.ranked;
  outcome.feasible = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.feasible; });
  outcome.pruned = std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.pruned; });
  outcome.scenario = run.scenario;

  if (outcome.feasible == 0) {  // a failed run: the previous outputs stay; every candidate's reason in infeasible.csv
    write_file_atomically(outcome.out / "infeasible.csv", ranking_csv(run.scenario, ranked, cost));
    outcome.no_feasible_message = no_feasible_strategy_message(run.scenario, ranked, outcome.out / "infeasible.csv");
    return outcome;
  }

  // The plan best.json holds: the fastest, or the candidate --plan-key names (simulated, not pruned). Checked
  // before anything is written: a run that fails leaves the previous outputs as they were.
  outcome.chosen = settings.plan_key.empty() ? 0 : plan_key_index(ranked, settings.plan_key, outcome.out);
  check_plan_can_be_written(run.scenario, ranked[outcome.chosen]);
  std::filesystem::create_directories(folder.staged("traces"));
  const int traced = std::min<int>(settings.top, static_cast<int>(outcome.feasible));
  IterationGraph best_graph;
  std::vector<ComparedPlan> compared;
  outcome.best = replay_top(run, ranked, outcome.chosen, traced, folder.staged("traces"), settings.trace_format,
                            best_graph, compared);
  // Whether twin execute runs them: the ten fastest (the K traced, if more) and the chosen plan.
  check_executable(run.scenario, ranked, static_cast<std::size_t>(std::max(kExactTop, settings.top)), outcome.chosen);
  write_file_atomically(folder.staged("ranking.csv"), ranking_csv(run.scenario, ranked, cost));
  write_best_plan(folder.staged("best.json"), run.scenario, outcome.best, best_graph);  // one op per line
  write_file_atomically(folder.staged("megatron_args.txt"), megatron_args(run.scenario, outcome.best));
  write_file_atomically(folder.staged("report.html"), html_report(run.scenario, ranked, best_graph, outcome.best, compared, cost));
  folder.publish();
  return outcome;
}

}  // namespace twin
