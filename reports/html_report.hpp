// report.html: one self-contained file (inline CSS, SVG and one script, no network) with the scenario, the best
// strategy with a "why this one" paragraph, every candidate's time against its memory with the Pareto front, the
// top plans side by side, the best's timeline, memory and time breakdowns, and the sortable, filterable ranking.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "core/scenario_cost.hpp"
#include "reports/plan_comparison.hpp"
#include "strategies/search.hpp"

namespace twin {

// `ranked` as search() returns it; `best` must carry op timings for `best_graph` (evaluate with
// record_op_timings); `compared`: the top plans, fastest first (none: no side-by-side section). The profile shown
// is scenario.profile ("builtin" adds the estimates warning). With `cost` (the scenario's cost section) the
// ranking shows each candidate's cost (reports/training_cost.hpp).
std::string html_report(const Scenario& scenario, const std::vector<Candidate>& ranked,
                        const IterationGraph& best_graph, const Candidate& best,
                        const std::vector<ComparedPlan>& compared = {}, const CostConfig* cost = nullptr);

// Writes html_report atomically.
void write_html_report(const std::filesystem::path& path, const Scenario& scenario,
                       const std::vector<Candidate>& ranked, const IterationGraph& best_graph, const Candidate& best,
                       const std::vector<ComparedPlan>& compared = {}, const CostConfig* cost = nullptr);

// Per entry of a memory estimate with `stages` entries, the smallest GPU memory among the rank classes it
// describes (the one that must fit), for the memory chart's capacity line.
std::vector<double> stage_capacities_GiB(const Scenario& scenario, const IterationGraph& graph, std::size_t stages);

// The "why this one" paragraph (HTML-escaped sentences built from the numbers).
std::string why_this_one_html(const std::vector<Candidate>& ranked, const Candidate& best,
                              const std::vector<double>& capacity_GiB);

}  // namespace twin
