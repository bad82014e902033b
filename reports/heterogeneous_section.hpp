// The report's heterogeneous section: the best asymmetric plan among the ranked candidates, stage by stage
// (GPU kind, devices, TP size, layers, memory), its batch shares, and how it compares with the best
// uniform plan the same mixed cluster allows.
#pragma once
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// Empty unless `ranked` (fastest feasible first) holds a feasible heterogeneous candidate.
std::string heterogeneous_section_html(const std::vector<Candidate>& ranked);

}  // namespace twin
