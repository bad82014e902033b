// The two timelines of reports/execution_charts.hpp in one SVG, so one time axis and one set of grid
// lines serve both. Lanes are binned per pixel column like timeline_svg: a column takes the colour of
// the kind covering most of it, runs of equal columns are one rect, so the size is lanes x plot width.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/op_kinds.hpp"
#include "reports/execution_charts.hpp"
#include "reports/format.hpp"
#include "reports/svg.hpp"

namespace twin {
namespace {

constexpr double kDualLabelWidth = 220, kDualRightMargin = 20, kDualTop = 4, kTitleHeight = 20, kDualLaneHeight = 16,
                 kSectionGap = 10, kDualAxisHeight = 40;
constexpr double kDualMinColumnCoverage = 0.2;  // a mostly idle column stays blank

struct Interval {
  TimeNs start_ns = 0, end_ns = 0;
  OpIndex op = 0;
};

struct DualLane {
  std::string label;
  std::vector<Interval> intervals;  // by start
};

struct Section {
  std::string title;
  std::vector<DualLane> lanes;
  std::size_t lanes_left_out = 0;
};

std::string run_tooltip(const RankClass& rank_class, const std::vector<Interval>& intervals, std::size_t first,
                        std::size_t last) {
  const Interval& a = intervals[first];
  if (first + 1 == last)
    return fmt::format("{} · {} ms (at {} ms)", op_name(rank_class.op(a.op)), milliseconds_text(a.end_ns - a.start_ns),
                       milliseconds_text(a.start_ns));
  TimeNs busy_ns = 0;
  for (std::size_t i = first; i < last; ++i) busy_ns += intervals[i].end_ns - intervals[i].start_ns;
  return fmt::format("{} spans, {} ms busy, {}–{} ms: {} … {}", last - first, milliseconds_text(busy_ns),
                     milliseconds_text(a.start_ns), milliseconds_text(intervals[last - 1].end_ns),
                     op_name(rank_class.op(a.op)), op_name(rank_class.op(intervals[last - 1].op)));
}

void draw_lane(Svg& svg, const RankClass& rank_class, const DualLane& lane, double y, int width_px, double px_per_ns) {
  std::vector<std::array<double, kOpKindCount>> cover(static_cast<std::size_t>(width_px));
  for (auto& column : cover) column.fill(0.0);
  for (const Interval& interval : lane.intervals) {
    const double x0 = interval.start_ns * px_per_ns, x1 = interval.end_ns * px_per_ns;
    const int kind = static_cast<int>(rank_class.op(interval.op).kind);
    const int last_column = std::min(width_px - 1, static_cast<int>(std::ceil(x1)) - 1);
    for (int c = std::max(0, static_cast<int>(std::floor(x0))); c <= last_column; ++c)
      cover[c][kind] += std::min(x1, c + 1.0) - std::max(x0, static_cast<double>(c));
  }
  std::vector<int> column_kind(cover.size(), -1);
  for (std::size_t c = 0; c < cover.size(); ++c) {
    double total = 0;
    int best = 0;
    for (int k = 0; k < kOpKindCount; ++k) {
      total += cover[c][k];
      if (cover[c][k] > cover[c][best]) best = k;
    }
    if (total >= kDualMinColumnCoverage) column_kind[c] = best;
  }
  svg.text(kDualLabelWidth - 6, y + 12, lane.label, "end", 11);
  std::size_t next = 0;  // intervals ending before the current run are done
  for (int a = 0; a < width_px;) {
    int b = a + 1;
    while (b < width_px && column_kind[b] == column_kind[a]) ++b;
    if (column_kind[a] >= 0) {
      while (next < lane.intervals.size() && lane.intervals[next].end_ns * px_per_ns <= a) ++next;
      std::size_t end = next;
      while (end < lane.intervals.size() && lane.intervals[end].start_ns * px_per_ns < b) ++end;
      const std::string tooltip = end > next ? run_tooltip(rank_class, lane.intervals, next, end) : "";
      svg.rect(kDualLabelWidth + a, y + 2, b - a, kDualLaneHeight - 4, kind_color(static_cast<OpKind>(column_kind[a])),
               tooltip);
    }
    a = b;
  }
}

Section simulated_section(const RankClass& rank_class, const std::vector<PredictedOpTime>& times) {
  std::map<int, DualLane> by_stream;  // display order: compute, compute2, then the communication streams
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    const Stream stream = rank_class.op(i).stream;
    const int order = stream == Stream::compute2 ? 1 : stream == Stream::compute ? 0 : 1 + static_cast<int>(stream);
    DualLane& lane = by_stream[order];
    lane.label = "simulated " + to_string(stream);
    lane.intervals.push_back({times[i].start_ns, times[i].start_ns + times[i].duration_ns, i});
  }
  Section section{fmt::format("simulated: {} (predicted start and duration of each op, best.json)", rank_class.label),
                  {}, 0};
  for (auto& [order, lane] : by_stream) {
    std::stable_sort(lane.intervals.begin(), lane.intervals.end(),
                     [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    section.lanes.push_back(std::move(lane));
  }
  return section;
}

Section measured_section(const MeasuredIteration& measured) {
  Section section{fmt::format("measured: rank {}, iteration {} (the median span of {} measured iterations, CUPTI)",
                              measured.rank, measured.iteration, measured.measured_iterations),
                  {}, 0};
  for (const MeasuredStream& stream : measured.streams) {
    DualLane lane{"measured " + stream.name, {}};
    for (const IterationKernel& kernel : measured.kernels)
      if (kernel.stream_id == stream.stream_id) lane.intervals.push_back({kernel.start_ns, kernel.end_ns, kernel.op});
    section.lanes.push_back(std::move(lane));
  }
  return section;
}

}  // namespace

std::string dual_timeline_svg(const IterationGraph& graph, const PlanPrediction& prediction, int rank_class,
                              const MeasuredIteration* measured, const DualTimelineOptions& options) {
  const RankClass& ops = graph.classes.at(static_cast<std::size_t>(rank_class));
  if (measured && measured->rank_class != rank_class)
    throw std::invalid_argument(fmt::format("dual_timeline_svg: the measured iteration is of class {}, not {}",
                                            measured->rank_class, rank_class));
  std::vector<Section> sections = {simulated_section(ops, prediction.ops.at(static_cast<std::size_t>(rank_class)))};
  TimeNs end_ns = prediction.class_finish_ns.at(static_cast<std::size_t>(rank_class));
  for (const DualLane& lane : sections.front().lanes)
    for (const Interval& interval : lane.intervals) end_ns = std::max(end_ns, interval.end_ns);
  if (measured) {
    sections.push_back(measured_section(*measured));
    end_ns = std::max(end_ns, measured->span_ns);
  }
  const auto max_lanes = static_cast<std::size_t>(std::max(1, options.max_lanes_per_timeline));
  double height = kDualTop;
  for (Section& section : sections) {
    if (section.lanes.size() > max_lanes) {
      section.lanes_left_out = section.lanes.size() - max_lanes;
      section.lanes.resize(max_lanes);
    }
    height += kTitleHeight +
              kDualLaneHeight * static_cast<double>(section.lanes.size() + (section.lanes_left_out ? 1 : 0)) +
              kSectionGap;
  }
  const int width_px = std::max(100, options.plot_width_px);
  const double plot_bottom = height;
  height += kDualAxisHeight;
  Svg svg(kDualLabelWidth + width_px + kDualRightMargin, height,
          measured ? "simulated and measured timelines of one iteration on one time axis"
                   : "simulated timeline of one iteration");

  const double end_ms = std::max<double>(1, static_cast<double>(end_ns)) / 1e6;
  const double px_per_ns = width_px / std::max<double>(1, static_cast<double>(end_ns));
  const std::vector<double> ticks = nice_ticks(end_ms, 10);
  const int decimals = ticks.size() > 1 ? tick_decimals(ticks[1] - ticks[0]) : 0;
  for (double tick : ticks) {
    const double x = kDualLabelWidth + tick * 1e6 * px_per_ns;
    svg.line(x, kDualTop, x, plot_bottom, "#eaeef2");
    svg.text(x, plot_bottom + 14, fixed(tick, decimals), "middle", 11);
  }
  svg.text(kDualLabelWidth + width_px / 2.0, plot_bottom + 32, "time from the iteration's start (ms)", "middle", 12);

  double y = kDualTop;
  for (const Section& section : sections) {
    svg.text(kDualLabelWidth, y + 14, section.title, "start", 12, "#1f2328");
    y += kTitleHeight;
    for (const DualLane& lane : section.lanes) {
      draw_lane(svg, ops, lane, y, width_px, px_per_ns);
      y += kDualLaneHeight;
    }
    if (section.lanes_left_out > 0) {
      svg.text(kDualLabelWidth - 6, y + 12, fmt::format("{} more lanes not shown", section.lanes_left_out), "end", 11,
               "#8a3b12");
      y += kDualLaneHeight;
    }
    y += kSectionGap;
  }
  return svg.str();
}

}  // namespace twin
