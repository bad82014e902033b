// The best strategy's iteration as an SVG Gantt chart: one lane per (rank class, stream), ops coloured by
// family. Sub-pixel ops are binned per pixel column so the chart stays small for 100k-op graphs.
#pragma once
#include <string>

#include "core/op_graph.hpp"
#include "sim/result.hpp"

namespace twin {

enum class OpFamily { gemm, attention, memory_bound, tp_comm, dp_comm, pp_p2p, cp_comm, ep_comm, optimizer, count };
inline constexpr int kOpFamilyCount = static_cast<int>(OpFamily::count);

// Communication goes by its communicator (a data-parallel all-gather is DP), compute by its kind.
OpFamily op_family(const Op& op);
std::string family_name(OpFamily family);
std::string family_color(OpFamily family);

struct TimelineOptions {
  int plot_width_px = 1000;   // one pixel column per plot pixel
  int max_lanes = 96;         // later lanes are left out, with a note in the chart
  TimeNs axis_end_ns = 0;     // the time at the plot's right edge, for charts compared on one scale (0: its own end)
  int only_class = -1;        // draw this class of GPU ranks alone (-1: every class)
  bool op_tooltips = true;    // each bar names its ops (most of the chart's bytes)
};

// Needs op timings in `result` (throws std::invalid_argument otherwise). Lane labels are whole: the report's script
// fits the chart to them (data-fit).
std::string timeline_svg(const IterationGraph& graph, const IterationResult& result,
                         const TimelineOptions& options = {});

// An HTML legend of the families, coloured like the chart.
std::string family_legend_html();

}  // namespace twin
