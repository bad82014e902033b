// ranking.csv: one RFC-4180 row per candidate, feasible ones ranked first, infeasible ones with their
// reason. Columns use Megatron-LM's names for strategy fields and carry units in metric names.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/scenario.hpp"
#include "core/scenario_cost.hpp"
#include "core/text_format.hpp"  // csv_field()
#include "strategies/search.hpp"

namespace twin {

// The header row's column names, in order.
const std::vector<std::string>& ranking_csv_columns();

// ranking_csv_columns(), then with `cost` (the scenario's cost section) the columns of reports/training_cost.hpp.
std::vector<std::string> ranking_columns(const CostConfig* cost);

// One row of fields per candidate, under ranking_columns(cost): `candidates` in ranked order (as search() returns
// them); `place` (the position in the ranking) counts feasible rows from 1 and is empty for the others. The report
// and the Python module use these same rows, so a column added here appears there too.
std::vector<std::vector<std::string>> ranking_rows(const Scenario& scenario, const std::vector<Candidate>& candidates,
                                                   const CostConfig* cost = nullptr);

// ranking_rows under the header row; lines end in CRLF as RFC 4180 says.
std::string ranking_csv(const Scenario& scenario, const std::vector<Candidate>& candidates,
                        const CostConfig* cost = nullptr);

// RFC 4180 text of `rows` (csv_field quoting, CRLF line ends).
std::string csv_text(const std::vector<std::vector<std::string>>& rows);

}  // namespace twin
