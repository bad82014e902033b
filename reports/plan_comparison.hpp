// The top plans side by side in report.html: their times and the parts of them, the bytes each communicator
// moves, the MoE routing priced and the experts' all-to-all, and their timelines on one time scale.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "strategies/search.hpp"

namespace twin {

// How many of the fastest plans the report sets side by side (twin simulate's --top 3, its default, traces as many).
inline constexpr int kComparedPlans = 3;

// A top plan, simulated again with its op timings, reduced to what the comparison shows (the graph and the
// timings are not kept: twin simulate builds one plan at a time).
struct ComparedPlan {
  std::size_t place = 0;  // position in the ranking, from 1
  Candidate candidate;    // its numbers; op timings dropped
  // Bytes one GPU hands to each communicator in an iteration (a collective's buffer as nccl-tests sizes it, the
  // messages it sends), the most over the plan's classes of GPU ranks; indexed by GroupKind (none: a hot-switching
  // plan's re-sharding between layouts).
  std::array<Bytes, kGroupKindCount> communication_bytes{};
  Bytes moe_all_to_all_bytes = 0;  // of the expert communicator's, the dispatch and combine all-to-alls
  std::string timeline_svg;        // its critical class of GPU ranks, on the axis the comparison shares
};

// `detailed` and `graph` as evaluate_again hands them back with op timings; `axis_end_ns`: the time at the right
// edge of the shared axis (the slowest compared plan's iteration).
ComparedPlan compare_plan(std::size_t place, const Candidate& detailed, const IterationGraph& graph,
                          TimeNs axis_end_ns);

// The section; empty when there is no plan to compare.
std::string plan_comparison_section_html(const Scenario& scenario, const std::vector<ComparedPlan>& plans);

}  // namespace twin
