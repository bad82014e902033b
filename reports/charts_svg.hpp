// Bar charts of the HTML report: the best strategy's memory per pipeline stage against GPU capacity,
// and the time breakdown of the top candidates.
#pragma once
#include <string>
#include <vector>

#include "strategies/memory.hpp"
#include "strategies/search.hpp"

namespace twin {

// One stacked bar per stage (parameters, gradients, optimizer states, activations, buffers, workspace);
// `capacity_GiB[stage]` is drawn as a dashed line over the stage's bar (0 = unknown, not drawn).
std::string memory_chart_svg(const MemoryEstimate& memory, const std::vector<double>& capacity_GiB);
std::string memory_legend_html();

// One horizontal stacked bar per candidate (compute, exposed communication, pipeline bubble, optimizer),
// on a common scale, labelled with the strategy key and the iteration time.
std::string time_breakdown_svg(const std::vector<const Candidate*>& candidates);
std::string time_legend_html();

}  // namespace twin
