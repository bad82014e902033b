// The report's per-layer section: for the best per-layer plan among the top candidates, each stage's
// layers as runs of one layer strategy, and how it compares with the best uniform strategy simulated.
#pragma once
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// Empty unless one of `top` (fastest first) is a per-layer plan. `ranked` gives the best feasible
// uniform strategy for the comparison.
std::string per_layer_section_html(const std::vector<const Candidate*>& top, const std::vector<Candidate>& ranked);

}  // namespace twin
