// The report is assembled from escaped fragments; charts come from charts_svg/timeline_svg/tradeoff_chart, the
// table's data from ranking_table, and one inlined script (reports/report_script.js) fits the charts to their
// measured labels and draws the table. No element references anything outside the file, so it renders offline
// and archives well.
#include "reports/html_report.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "reports/charts_svg.hpp"
#include "reports/double_strand_section.hpp"
#include "reports/per_layer_section.hpp"
#include "reports/hot_switch_section.hpp"
#include "reports/heterogeneous_section.hpp"
#include "reports/format.hpp"
#include "reports/page_style.hpp"
#include "reports/ranking_table.hpp"
#include "reports/report_script.hpp"
#include "reports/timeline_svg.hpp"
#include "reports/tradeoff_chart.hpp"
#include "strategies/flops.hpp"

namespace twin {
namespace {

constexpr std::size_t kTopCandidatesCharted = 10;

const std::string kStyle = std::string("<style>\n") + kPageStyle + R"(.warning { background: #fff8e1; border: 1px solid #f0c36d; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
.legend i.dashed { height: 0; border-top: 2px dashed #c0392b; border-radius: 0; vertical-align: 3px; }
.legend i.front { border-radius: 50%; background: #e15759; }
.legend i.ring { border-radius: 50%; border: 1.5px solid #8a8f98; width: 9px; height: 9px; }
.legend i.diamond { background: #b07aa1; transform: rotate(45deg) scale(0.8); }
.chart svg { max-width: 100%; height: auto; }
p.why, h2 .key, h3 .key, td.key { overflow-wrap: anywhere; }
h3 { font-size: 15px; margin: 20px 0 6px; font-weight: 600; }
.table-scroll { overflow-x: auto; max-height: 1400px; overflow-y: auto; border: 1px solid #e3e6eb; border-radius: 6px; }
.table-tools { display: flex; flex-wrap: wrap; gap: 8px 20px; align-items: center; margin: 8px 0; font-size: 14px; }
.table-tools input[type=search] { font: inherit; padding: 3px 6px; max-width: 100%; }
table#ranking, table.compare, table.front { border-collapse: collapse; font-size: 12.5px; }
table#ranking { width: 100%; }
#ranking th, table.compare th, table.front th { position: sticky; top: 0; background: #f6f8fa; text-align: left;
  padding: 5px 6px; border-bottom: 2px solid #d0d7de; white-space: nowrap; }
table.compare th { position: static; }
table.compare tr th:first-child { background: #fff; border-bottom: 1px solid #eaeef2; font-weight: normal; color: #59636e; }
#ranking th button { all: unset; cursor: pointer; }
#ranking th button:focus-visible { outline: 2px solid #4e79a7; }
#ranking th[aria-sort=ascending] button::after { content: " \25B2"; }
#ranking th[aria-sort=descending] button::after { content: " \25BC"; }
#ranking td, table.compare td, table.front td { padding: 3px 6px; border-bottom: 1px solid #eaeef2; vertical-align: top;
  white-space: nowrap; }
#ranking td.num, table.compare td.num, table.front td.num { text-align: right; font-variant-numeric: tabular-nums; }
#ranking td.key, table.compare td.key, table.front td.key { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  monospace; font-size: 11.5px; white-space: normal; min-width: 280px; max-width: 420px; }
#ranking tr.tie td { color: #8a6d00; }
#ranking td.reason, #ranking td.plan { color: #8a3b12; min-width: 260px; max-width: 480px; white-space: normal;
  overflow-wrap: anywhere; }
#ranking td.plan { color: inherit; }
#ranking tr.feasible:nth-child(even) { background: #fafbfc; }
#ranking tr.best { background: #e9f6ec; font-weight: 600; }
#ranking tr.infeasible { color: #6e7781; }
.note { color: #59636e; font-size: 13px; }
footer { margin-top: 36px; color: #59636e; font-size: 13px; }
</style>
)";

std::string cluster_text(const Cluster& cluster) {
  std::string text;
  for (const NodeGroup& group : cluster.node_groups) {
    if (!text.empty()) text += " + ";
    text += fmt::format("{} node{} × {} {} ({} {} GB/s", group.count, group.count == 1 ? "" : "s", group.gpus_per_node,
                        group.gpu.name, to_string(group.intra_node.kind), fixed(group.intra_node.bandwidth_GBps, 0));
    if (group.nics.count > 0)
      text += fmt::format("; {} × {} Gb/s NICs", group.nics.count, fixed(group.nics.bandwidth_Gbps, 0));
    text += ")";
  }
  return fmt::format("{} ({} GPUs, {} network)", text, cluster.total_gpus(), cluster.network.topology);
}

std::string model_text(const ModelConfig& model) {
  std::string text = fmt::format("{}: {} layers, hidden {}, {} heads ({} KV groups), vocabulary {}",
                                 model.name.empty() ? "custom" : model.name, model.num_layers, model.hidden_size,
                                 model.num_attention_heads, model.num_query_groups, model.vocab_size);
  if (model.is_moe())
    text += fmt::format(", MoE {} experts top-{}", model.moe.num_experts, model.moe.top_k);
  return text + fmt::format(", {}B parameters", fixed(static_cast<double>(parameter_count(model)) / 1e9, 2));
}

std::string header_html(const Scenario& scenario) {
  const double peak_tflops = peak_flops_of_first_gpus(scenario, scenario.cluster.total_gpus()) / 1e12;
  std::string html = "<header>\n<h1>" + escape_html(scenario.name.empty() ? "twin report" : scenario.name) + "</h1>\n";
  html += "<dl class=\"facts\">\n";
  const auto fact = [&](const char* name, const std::string& value) {
    html += std::string("<dt>") + name + "</dt><dd>" + escape_html(value) + "</dd>\n";
  };
  fact("model", model_text(scenario.model));
  fact("training", fmt::format("sequence length {}, global batch {} sequences, {}, {}", scenario.training.seq_length,
                               scenario.training.global_batch_size, scenario.training.precision,
                               scenario.training.optimizer));
  fact("cluster", cluster_text(scenario.cluster));
  fact("profile", scenario.profile);
  if (!scenario.profile_workload.empty())
    fact("workload", fmt::format("{} training, priced with {}",
                                 scenario.framework.name ? std::string(to_string(*scenario.framework.name))
                                                         : std::string("the scenario names no framework:"),
                                 scenario.profile_workload));
  fact("MFU formula", kFlopFormula);
  fact("peak used", fmt::format("{} TFLOP/s: the sum of every GPU's {} datasheet peak", fixed(peak_tflops, 0),
                                    peak_precision_text(scenario)));
  html += "</dl>\n";
  if (scenario.profile == "builtin")
    html += "<p class=\"warning\"><b>Not this cluster's measurements.</b> These times come from the built-in profile "
            "(Hopper kernels measured by twin calibrate on one H100 and one H200, Ampere kernels from publications, "
            "two in-training factors fitted on published runs: docs/VALIDATION.md), not from this cluster. Run "
            "<code>twin calibrate</code> and simulate with its profile for predictions to trust.</p>\n";
  if (const std::string warning = framework_mismatch(scenario.framework.name, scenario.profile_framework);
      !warning.empty())
    html += "<p class=\"warning\"><b>Another framework's speed.</b> " + escape_html(warning) + "</p>\n";
  if (scenario.profile_scaling)
    html += "<p class=\"warning\"><b>Scaled profile.</b> A GPU the profile does not describe is priced from another "
            "GPU's measurements, scaled by their datasheet ratios (bf16 peak for GEMMs and attention, HBM bandwidth "
            "for the rest): a rough estimate.</p>\n";
  return html + "</header>\n";
}

std::string cards_html(const Candidate& best) {
  const auto card = [](const std::string& value, const char* label) {
    return "<div class=\"card\"><b>" + escape_html(value) + "</b><span>" + label + "</span></div>";
  };
  std::string html = "<div class=\"cards\">";
  html += card(milliseconds_text(best.result.iteration_ns) + " ms", "iteration time");
  html += card(grouped(best.throughput.tokens_per_s), "tokens/s");
  html += card(percent_label(best.throughput.mfu), "MFU");
  html += card(percent_label(best.throughput.hfu), "HFU");
  html += card(gib_text(best.memory.peak_bytes(), 1) + " GiB", "peak memory per GPU");
  return html + "</div>\n";
}

std::array<TimeNs, 4> parts(const TimeBreakdown& b) {
  return {b.compute_ns, b.exposed_communication_ns, b.bubble_ns, b.optimizer_ns};
}
constexpr std::array<const char*, 4> kPartNames = {"compute", "exposed communication", "pipeline bubble", "optimizer"};

// Each candidate's row in the ranking's embedded data (-1: not embedded), for the trade-off chart's points.
std::vector<long> table_rows_of(const std::vector<Candidate>& ranked) {
  std::vector<long> row_of(ranked.size(), -1);
  const std::vector<std::size_t> embedded = embedded_rows(ranked);
  for (std::size_t row = 0; row < embedded.size(); ++row) row_of[embedded[row]] = static_cast<long>(row);
  return row_of;
}

double smallest_gpu_memory_GiB(const Cluster& cluster) {
  double smallest = 0;
  for (const NodeGroup& group : cluster.node_groups)
    smallest = smallest > 0 ? std::min(smallest, group.gpu.memory_GiB) : group.gpu.memory_GiB;
  return smallest;
}

}  // namespace

// Uniform plans estimate memory per stage; asymmetric ones (several pipelines, each with its own stages on
// its own GPUs) per pipeline stage, in the order of the graph's classes.
std::vector<double> stage_capacities_GiB(const Scenario& scenario, const IterationGraph& graph, std::size_t stages) {
  std::vector<double> capacity(stages, 0.0);
  const bool per_class = std::any_of(graph.classes.begin(), graph.classes.end(),
                                     [](const RankClass& c) { return c.pipeline > 0; });
  for (const RankClass& rank_class : graph.classes) {
    const int entry = per_class ? rank_class.index : rank_class.stage;
    if (entry < 0 || static_cast<std::size_t>(entry) >= stages) continue;
    if (rank_class.node_group < 0 || static_cast<std::size_t>(rank_class.node_group) >= scenario.cluster.node_groups.size())
      continue;
    const double memory = scenario.cluster.node_groups[rank_class.node_group].gpu.memory_GiB;
    double& slot = capacity[entry];
    slot = slot > 0 ? std::min(slot, memory) : memory;
  }
  return capacity;
}

namespace {

// The runner-up against the winner: its time, the part of the step that differs most, and whether the two tie.
std::string runner_up_text(const Candidate& best, const Candidate& runner_up) {
  const auto best_parts = parts(best.result.breakdown);
  const auto other_parts = parts(runner_up.result.breakdown);
  std::size_t largest = 0;
  for (std::size_t p = 1; p < other_parts.size(); ++p)
    if (std::llabs(other_parts[p] - best_parts[p]) > std::llabs(other_parts[largest] - best_parts[largest])) largest = p;
  const TimeNs difference_ns = runner_up.result.iteration_ns - best.result.iteration_ns;
  const TimeNs part_difference_ns = other_parts[largest] - best_parts[largest];
  std::string text =
      fmt::format(" The runner-up, {}, takes {} ms ({} longer); the largest difference is in {} ({}{} ms).",
                  runner_up.key(), milliseconds_text(runner_up.result.iteration_ns),
                  percent_label(static_cast<double>(difference_ns) / std::max<double>(1.0, best.result.iteration_ns)),
                  kPartNames[largest], part_difference_ns >= 0 ? "+" : "", milliseconds_text(part_difference_ns));
  if (static_cast<double>(difference_ns) <= kTieFraction * static_cast<double>(best.result.iteration_ns))
    text += fmt::format(" The two tie: {}% is within the model's mean error on published runs ({}%, "
                        "docs/VALIDATION.md).",
                        fixed(100.0 * difference_ns / std::max<double>(1.0, best.result.iteration_ns), 1),
                        fixed(100 * kTieFraction, 1));
  return text;
}

// The winner's step split into its parts, and its largest overhead.
std::string step_text(const Candidate& best) {
  const TimeBreakdown& b = best.result.breakdown;
  const double total = std::max<double>(1.0, static_cast<double>(b.total_ns()));
  const auto share = [&](TimeNs part) { return percent_label(static_cast<double>(part) / total); };
  std::string text = fmt::format(
      " One iteration takes {} ms ({} tokens/s, MFU {}): compute {}, exposed communication {}, "
      "pipeline bubble {}, optimizer {}.",
      milliseconds_text(best.result.iteration_ns), grouped(best.throughput.tokens_per_s),
      percent_label(best.throughput.mfu), share(b.compute_ns), share(b.exposed_communication_ns), share(b.bubble_ns),
      share(b.optimizer_ns));
  const auto best_parts = parts(b);
  std::size_t overhead = 1;
  for (std::size_t p = 2; p < best_parts.size(); ++p)
    if (best_parts[p] > best_parts[overhead]) overhead = p;
  if (best_parts[overhead] > 0)
    text += fmt::format(" Its largest overhead is the {} ({} of the iteration).", kPartNames[overhead],
                        share(best_parts[overhead]));
  return text;
}

std::string memory_text(const Candidate& best, const std::vector<double>& capacity_GiB) {
  if (best.memory.per_stage.empty()) return "";
  const int stage = best.memory.worst_stage;
  const double peak = static_cast<double>(best.memory.peak_bytes()) / kGiB;
  std::string text = fmt::format(" Peak memory is {} GiB per GPU on stage {}", fixed(peak, 1), stage);
  if (static_cast<std::size_t>(stage) < capacity_GiB.size() && capacity_GiB[stage] > 0)
    text += fmt::format(" of {} GiB ({} GiB headroom)", fixed(capacity_GiB[stage], 1),
                        fixed(capacity_GiB[stage] - peak, 1));
  return text + ".";
}

}  // namespace

std::string why_this_one_html(const std::vector<Candidate>& ranked, const Candidate& best,
                              const std::vector<double>& capacity_GiB) {
  std::size_t feasible = 0, out_of_memory = 0, pruned = 0;
  const Candidate* runner_up = nullptr;
  for (const Candidate& candidate : ranked) {
    if (candidate.feasible) {
      ++feasible;
      if (!runner_up && !(candidate.strategy == best.strategy)) runner_up = &candidate;
    } else if (candidate.pruned) {
      ++pruned;
    } else if (candidate.infeasible_reason.rfind("out of memory", 0) == 0) {
      ++out_of_memory;
    }
  }
  std::string text = feasible <= 1
                         ? fmt::format("{} is the only feasible candidate of {}.", best.key(), ranked.size())
                         : fmt::format("{} is the fastest of {} feasible candidates ({} enumerated).",
                                       best.key(), feasible + pruned, ranked.size());
  if (pruned > 0)
    text += fmt::format(" {} of them were simulated; the other {} could not reach the top ten (K with --top K "
                        "above ten): their compute alone is slower (`twin simulate --exhaustive` simulates them).",
                        feasible, pruned);
  text += step_text(best);
  if (runner_up) text += runner_up_text(best, *runner_up);
  text += memory_text(best, capacity_GiB);
  const std::size_t excluded = ranked.size() - feasible - pruned;
  if (excluded > 0)
    text += fmt::format(" {} candidates were excluded: {} out of memory, {} invalid for this model or cluster.",
                        excluded, out_of_memory, excluded - out_of_memory);
  return "<p class=\"why\">" + escape_html(text) + "</p>\n";
}

std::string html_report(const Scenario& scenario, const std::vector<Candidate>& ranked,
                        const IterationGraph& best_graph, const Candidate& best,
                        const std::vector<ComparedPlan>& compared, const CostConfig* cost) {
  const std::vector<double> capacity = stage_capacities_GiB(scenario, best_graph, best.memory.per_stage.size());
  std::vector<const Candidate*> top;
  for (const Candidate& candidate : ranked)
    if (candidate.feasible && top.size() < kTopCandidatesCharted) top.push_back(&candidate);

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + escape_html("twin: " + scenario.name) + "</title>\n" + kStyle + "</head>\n<body>\n<main>\n";
  html += header_html(scenario);

  html += "<section id=\"best\">\n<h2>Best strategy: <span class=\"key\">" + escape_html(best.key()) +
          "</span></h2>\n" + cards_html(best) + why_this_one_html(ranked, best, capacity) + "</section>\n";
  html += tradeoff_section_html(ranked, table_rows_of(ranked), smallest_gpu_memory_GiB(scenario.cluster));
  html += plan_comparison_section_html(scenario, compared);

  html += "<section id=\"timeline\">\n<h2>One iteration of the best strategy</h2>\n" + family_legend_html() +
          "\n<div class=\"chart\">" + timeline_svg(best_graph, best.result) + "</div>\n";
  html += "<p class=\"note\">One lane per class of GPU ranks and stream; GPU ranks that behave identically share a "
          "lane. Hover a bar for its ops. The Chrome traces written with this report show every op: open them in "
          "Perfetto (ui.perfetto.dev) or chrome://tracing.</p>\n</section>\n";

  html += "<section id=\"memory\">\n<h2>Memory per GPU, by pipeline stage</h2>\n" + memory_legend_html() +
          "\n<div class=\"chart\">" + memory_chart_svg(best.memory, capacity) + "</div>\n</section>\n";

  html += "<section id=\"breakdown\">\n<h2>Where the time goes: top candidates</h2>\n" + time_legend_html() +
          "\n<div class=\"chart\">" + time_breakdown_svg(top) + "</div>\n</section>\n";

  html += double_strand_section_html(top, ranked);
  html += per_layer_section_html(top, ranked);
  html += heterogeneous_section_html(ranked);
  html += hot_switch_section_html(ranked);

  html += "<section id=\"candidates\">\n<h2>Ranking</h2>\n" + ranking_table_html(scenario, ranked, kRankingTableMaxRows, cost) + "</section>\n";
  html += "<footer>Generated by twin simulate. Times are simulated; MFU counts model FLOPs only, HFU adds "
          "recomputed forward work.</footer>\n</main>\n<script>" + std::string(report_script()) +
          "</script>\n</body>\n</html>\n";
  return html;
}

void write_html_report(const std::filesystem::path& path, const Scenario& scenario,
                       const std::vector<Candidate>& ranked, const IterationGraph& best_graph, const Candidate& best,
                       const std::vector<ComparedPlan>& compared, const CostConfig* cost) {
  write_file_atomically(path, html_report(scenario, ranked, best_graph, best, compared, cost));
}

}  // namespace twin
