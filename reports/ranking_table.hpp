// The ranking as an HTML table (id="ranking"): feasible candidates ranked first, then infeasible ones
// with their reasons, capped at `max_rows` rows with a note pointing to ranking.csv.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

inline constexpr std::size_t kRankingTableMaxRows = 300;
// Rows kept for infeasible candidates when the feasible ones alone would fill the table.
inline constexpr std::size_t kRankingTableInfeasibleRows = 50;

// Candidates this close to the best (as a fraction of its iteration time) tie: 3.9% is the mean |error| of
// twin's predictions on the published runs of tests/validation/published.json (docs/VALIDATION.md, 2026-11-25).
inline constexpr double kTieFraction = 0.039;

// Columns a caller adds before "why not" (the cost columns, reports/training_cost.hpp): their headers and, per
// candidate, its cells in the same order (plain text; the table escapes it).
struct RankingExtraColumns {
  std::vector<std::string> headers;
  std::function<std::vector<std::string>(const Candidate&)> cells;
};

// Each body row is <tr class="feasible">, <tr class="feasible tie"> (within kTieFraction of the best) or
// <tr class="infeasible">.
std::string ranking_table_html(const std::vector<Candidate>& candidates, std::size_t max_rows = kRankingTableMaxRows,
                               const RankingExtraColumns& extra = {});

}  // namespace twin
