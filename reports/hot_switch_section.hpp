// The report's hot-switching section: the best plan's phases (length range, sequences, packs, strategy),
// what each switch moves (intra- and inter-node bytes, the most one GPU receives), and by how much the plan
// wins or loses against the best static strategy that fits the longest sequence on the same packed batch.
#pragma once
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// Empty unless `ranked` holds a hot-switching plan of at least two phases (family "hot-switch").
std::string hot_switch_section_html(const std::vector<Candidate>& ranked);

}  // namespace twin
