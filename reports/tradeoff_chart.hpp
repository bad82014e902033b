// The space the search covered, in report.html: every candidate with a memory estimate placed by its peak memory
// per GPU and its iteration time, the Pareto front of the simulated ones drawn through them and listed.
#pragma once
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// Positions in `ranked` of the simulated candidates that no other simulated candidate matches or beats on both
// iteration time and peak memory per GPU while beating it on one, by increasing memory (so decreasing time).
std::vector<std::size_t> pareto_front(const std::vector<Candidate>& ranked);

// The chart (data-fit: the report's script fits it to its measured labels). Simulated candidates are dots at
// their time; candidates the search pruned are rings at their lower bound (they take at least that long), or
// triangles on the top edge when that is above the chart; out-of-memory ones are diamonds in a band above it at
// their memory. `row_of[i]` is candidate i's row in the embedded ranking (-1: not embedded), which the script
// turns into the point's tooltip. `capacity_GiB` (the smallest GPU's memory; 0: none) is drawn dashed.
// Empty when nothing was simulated.
std::string tradeoff_svg(const std::vector<Candidate>& ranked, const std::vector<std::size_t>& front,
                         const std::vector<long>& row_of, double capacity_GiB);

// The section: chart, legend, counts and the front as a table.
std::string tradeoff_section_html(const std::vector<Candidate>& ranked, const std::vector<long>& row_of,
                                  double capacity_GiB);

}  // namespace twin
