// The pictures of `twin report`: a log-log scatter of every measured op (predicted against measured,
// one colour per op kind) and the simulated and measured timelines of one rank, one above the other on
// one time axis. Both bound their size whatever the op count (points merge per cell, lanes bin per pixel).
#pragma once
#include <string>
#include <vector>

#include "core/op_graph.hpp"
#include "reports/execution_summary.hpp"
#include "reports/execution_trace.hpp"
#include "traces/plan_prediction.hpp"

namespace twin {

std::string kind_color(OpKind kind);
// An HTML legend of `kinds` (in the order given), coloured like the charts.
std::string kind_legend_html(const std::vector<OpKind>& kinds);

inline constexpr std::size_t kMaxScatterMarks = 4000;

// Points falling in the same few-pixel cell with the same kind are one mark (its tooltip counts them);
// past `max_marks` marks, those farthest from the diagonal are kept.
std::string op_scatter_svg(const IterationGraph& graph, const std::vector<OpPoint>& points,
                           std::size_t max_marks = kMaxScatterMarks);

struct DualTimelineOptions {
  int plot_width_px = 1000;
  int max_lanes_per_timeline = 24;  // later lanes are left out, with a note in the chart
};

// The simulated iteration of `rank_class` (best.json's predicted start and duration of each op, one lane
// per stream), and under it `measured` (one lane per CUDA stream), when given, on the same time axis.
// Throws std::invalid_argument when `measured` is of another class.
std::string dual_timeline_svg(const IterationGraph& graph, const PlanPrediction& prediction, int rank_class,
                              const MeasuredIteration* measured, const DualTimelineOptions& options = {});

}  // namespace twin
