// Simulated candidates' results as text, so that the processes of one search (strategies/search.hpp,
// SearchProcesses) can hand them to each other: what evaluate() computed for each, exactly (JSON keeps
// every integer and the shortest text that reads back as the same double).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// The results of candidates[i] for each i of `indices` (simulated, without op timings).
std::string simulated_results_to_string(const std::vector<Candidate>& candidates,
                                        const std::vector<std::size_t>& indices);

// Sets the result, throughput and strand pairings of every candidate `text` names, as simulated by another
// process of the same search. Throws std::runtime_error when the text is not such a list or names a candidate out of range.
void read_simulated_results(const std::string& text, std::vector<Candidate>& candidates);

// The lower bounds (Candidate::lower_bound_ns) of candidates[i] for each i of `indices`, and back.
std::string lower_bounds_to_string(const std::vector<Candidate>& candidates, const std::vector<std::size_t>& indices);
void read_lower_bounds(const std::string& text, std::vector<Candidate>& candidates);

}  // namespace twin
