// ranking.csv: one RFC-4180 row per candidate, feasible ones ranked first, infeasible ones with their
// reason. Columns use Megatron-LM's names for strategy fields and carry units in metric names.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/scenario.hpp"
#include "core/text_format.hpp"  // csv_field()
#include "strategies/search.hpp"

namespace twin {

// The header row's column names, in order.
const std::vector<std::string>& ranking_csv_columns();

// One row of fields per candidate, under ranking_csv_columns(): `candidates` in ranked order (as search() returns
// them); `place` (the position in the ranking) counts feasible rows from 1 and is empty for the others. The report
// embeds these same rows, so a column added here appears there too.
std::vector<std::vector<std::string>> ranking_rows(const Scenario& scenario, const std::vector<Candidate>& candidates);

// ranking_rows under the header row; lines end in CRLF as RFC 4180 says.
std::string ranking_csv(const Scenario& scenario, const std::vector<Candidate>& candidates);

}  // namespace twin
