// The report's double-strand section: for the best double-strand candidate among the top ones, which
// segments of a layer's forward co-run with which of its mirror layer's backward, and how much exposed
// communication that removed against the same strategy run with 1F1B.
#pragma once
#include <string>
#include <vector>

#include "strategies/search.hpp"

namespace twin {

// Empty unless one of `top` (fastest first) is a double-strand candidate. `ranked` is searched for the
// same strategy with the 1F1B schedule, the comparison the section states when it was simulated.
std::string double_strand_section_html(const std::vector<const Candidate*>& top, const std::vector<Candidate>& ranked);

}  // namespace twin
