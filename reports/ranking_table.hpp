// The ranking in report.html: ranking.csv's rows embedded once as JSON (<script id="ranking-data">), which the
// page's script (reports/report_script.js) draws as a table (id="ranking") the reader sorts by any column and
// filters. The columns are ranking.csv's, so a column added there appears here; the known ones get a heading,
// a unit and a place first. At most `max_rows` rows are embedded, with a note pointing to ranking.csv.
#pragma once
#include <string>
#include <vector>

#include "core/scenario.hpp"
#include "core/scenario_cost.hpp"
#include "strategies/search.hpp"

namespace twin {

// A 1,000-candidate report stays well under 2 MB with every row in it (docs/PERFORMANCE.md); beyond this many rows
// a search's file would grow by about 0.4 MB per thousand candidates, and ranking.csv holds them all.
inline constexpr std::size_t kRankingTableMaxRows = 5000;
// Rows kept for infeasible candidates when the feasible ones alone would fill the table.
inline constexpr std::size_t kRankingTableInfeasibleRows = 1000;

// Candidates this close to the best (as a fraction of its iteration time) tie: 3.9% is the mean |error| of
// twin's predictions on the published runs of tests/validation/published.json (docs/VALIDATION.md, 2026-11-25).
inline constexpr double kTieFraction = 0.039;

// The positions in `candidates` (ranked order) of the rows the table embeds, in the order it embeds them: the
// feasible ones first, then the others, keeping up to kRankingTableInfeasibleRows of those.
std::vector<std::size_t> embedded_rows(const std::vector<Candidate>& candidates,
                                       std::size_t max_rows = kRankingTableMaxRows);

// The table's tools (filter, "simulated only"), its empty <table id="ranking">, notes and the embedded data:
// {"columns": [{"name", "label", "title", "format", "numeric", "css", "tooltip", "index"}...] in the order shown,
//  "rows": [[field...]...] (ranking_rows' fields plus "vs_best", the iteration over the best's minus 1),
//  "tie_fraction": kTieFraction}.
// With `cost` (the scenario's cost section) its columns follow ranking.csv's others.
std::string ranking_table_html(const Scenario& scenario, const std::vector<Candidate>& candidates,
                               std::size_t max_rows = kRankingTableMaxRows, const CostConfig* cost = nullptr);

}  // namespace twin
