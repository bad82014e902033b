// The kind colours and the predicted-vs-measured scatter of reports/execution_charts.hpp. Axes are
// decades of time; an op on the dashed diagonal was predicted exactly, above it ran slower than predicted.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/op_kinds.hpp"
#include "reports/execution_charts.hpp"
#include "reports/format.hpp"
#include "reports/svg.hpp"

namespace twin {
namespace {

// Forward and backward of a kind share a hue (dark, light); communication is red to orange, p2p cyan.
constexpr std::array<const char*, kOpKindCount> kKindColors = {
    "#4e79a7",                        // gemm
    "#59a14f", "#8cd17d",             // attention
    "#b6992d", "#f1ce63",             // norm
    "#499894", "#86bcb6",             // rope
    "#d37295", "#fabfd2",             // activation
    "#79706e",                        // elementwise
    "#9d7660", "#d7b5a6",             // embedding
    "#b07aa1", "#d4a6c8",             // loss
    "#a0cbe8", "#bab0ac", "#8c6d31",  // moe router, permute, unpermute
    "#f28e2b",                        // optimizer step
    "#bcbd22", "#dbdb8d",             // fp8 cast, fp8 transpose
    "#e15759", "#ff9d9a", "#ffbe7d", "#9c2f45",  // all-reduce, all-gather, reduce-scatter, all-to-all
    "#17becf", "#9edae5",             // send, recv
};
static_assert(kKindColors.back() != nullptr, "a colour per op kind");

constexpr double kScatterLeft = 78, kScatterTop = 24, kPlot = 440, kRight = 24, kScatterBottom = 46, kMark = 5,
                 kCell = 3;

// 10^decade ns as a short time ("100 µs").
std::string decade_label(int decade) {
  static const std::array<const char*, 3> units = {"ns", "µs", "ms"};
  if (decade >= 9) return fmt::format("{} s", static_cast<long long>(std::llround(std::pow(10.0, decade - 9))));
  const int unit = std::max(0, decade / 3);
  return fmt::format("{} {}", static_cast<long long>(std::llround(std::pow(10.0, decade - 3 * unit))), units[unit]);
}

std::string percent_text(double ratio) { return (ratio >= 1 ? "+" : "") + fixed(100.0 * (ratio - 1), 1) + "%"; }

struct Mark {
  const OpPoint* first = nullptr;
  int count = 0;
  double farthest = 0;  // the largest |log10(measured / predicted)| among its points
};

// Decades from below the fastest to above the slowest time, mapped onto the plot's side.
struct LogScale {
  int low = 0, high = 1;
  double operator()(TimeNs ns) const { return (std::log10(static_cast<double>(ns)) - low) / (high - low) * kPlot; }
};

LogScale log_scale(const std::vector<OpPoint>& points) {
  TimeNs low_ns = points.front().predicted_ns, high_ns = low_ns;
  for (const OpPoint& p : points) {
    low_ns = std::min({low_ns, p.predicted_ns, p.measured_ns});
    high_ns = std::max({high_ns, p.predicted_ns, p.measured_ns});
  }
  LogScale scale;
  scale.low = static_cast<int>(std::floor(std::log10(static_cast<double>(low_ns))));
  scale.high = std::max(scale.low + 1, static_cast<int>(std::ceil(std::log10(static_cast<double>(high_ns)))));
  return scale;
}

void draw_axes(Svg& svg, const LogScale& scale) {
  const int low = scale.low, high = scale.high;
  svg.rect(kScatterLeft, kScatterTop, kPlot, kPlot, "#fafbfc");
  for (int decade = low; decade <= high; ++decade) {
    const double offset = static_cast<double>(decade - low) / (high - low) * kPlot;
    svg.line(kScatterLeft + offset, kScatterTop, kScatterLeft + offset, kScatterTop + kPlot, "#e3e6eb");
    svg.line(kScatterLeft, kScatterTop + kPlot - offset, kScatterLeft + kPlot, kScatterTop + kPlot - offset, "#e3e6eb");
    svg.text(kScatterLeft + offset, kScatterTop + kPlot + 16, decade_label(decade), "middle", 11);
    svg.text(kScatterLeft - 6, kScatterTop + kPlot - offset + 4, decade_label(decade), "end", 11);
  }
  svg.line(kScatterLeft, kScatterTop + kPlot, kScatterLeft + kPlot, kScatterTop, "#6e7781", 1, true);
  svg.text(kScatterLeft + kPlot / 2, kScatterTop + kPlot + 38, "predicted op time (best.json)", "middle", 12);
  svg.text(kScatterLeft - 6, kScatterTop - 10, "measured op time (median over iterations)", "start", 12);
}

using MarkCells = std::map<std::tuple<int, int, int>, Mark>;

// Points merged per (kind, cell): the mark count is bounded by kinds x cells, whatever the op count.
MarkCells merged_marks(const std::vector<OpPoint>& points, const LogScale& position) {
  MarkCells cells;
  for (const OpPoint& p : points) {
    const auto cell = std::make_tuple(static_cast<int>(p.kind), static_cast<int>(position(p.predicted_ns) / kCell),
                                      static_cast<int>(position(p.measured_ns) / kCell));
    Mark& mark = cells[cell];
    if (!mark.first) mark.first = &p;
    ++mark.count;
    mark.farthest = std::max(mark.farthest, std::abs(std::log10(static_cast<double>(p.measured_ns) / p.predicted_ns)));
  }
  return cells;
}

// At most max_marks of the marks, those farthest from the diagonal, in cell order.
std::vector<const Mark*> farthest_marks(const MarkCells& cells, std::size_t max_marks) {
  std::vector<const Mark*> marks;
  for (const auto& [cell, mark] : cells) marks.push_back(&mark);
  if (marks.size() <= max_marks) return marks;
  std::vector<std::size_t> order(marks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return marks[a]->farthest > marks[b]->farthest; });
  std::vector<bool> keep(marks.size(), false);
  for (std::size_t i = 0; i < max_marks; ++i) keep[order[i]] = true;
  std::vector<const Mark*> in_cell_order;
  for (std::size_t i = 0; i < marks.size(); ++i)
    if (keep[i]) in_cell_order.push_back(marks[i]);
  return in_cell_order;
}

}  // namespace

std::string kind_color(OpKind kind) { return kKindColors[static_cast<int>(kind)]; }

std::string kind_legend_html(const std::vector<OpKind>& kinds) {
  std::string html = "<div class=\"legend\">";
  for (OpKind kind : kinds)
    html += "<span><i style=\"background:" + kind_color(kind) + "\"></i>" + escape_html(to_string(kind)) + "</span>";
  return html + "</div>";
}

std::string op_scatter_svg(const IterationGraph& graph, const std::vector<OpPoint>& points, std::size_t max_marks) {
  Svg svg(kScatterLeft + kPlot + kRight, kScatterTop + kPlot + kScatterBottom,
          "measured against predicted time of every op, log-log");
  if (points.empty()) {
    svg.text(kScatterLeft + kPlot / 2, kScatterTop + kPlot / 2, "no op has both a prediction and a measurement",
             "middle", 13);
    return svg.str();
  }
  const LogScale position = log_scale(points);
  draw_axes(svg, position);
  const auto cells = merged_marks(points, position);
  const std::vector<const Mark*> marks = farthest_marks(cells, max_marks);
  const std::size_t left_out = cells.size() - marks.size();
  for (const Mark* mark : marks) {
    const OpPoint& p = *mark->first;
    const std::string name = op_name(graph.classes.at(static_cast<std::size_t>(p.rank_class)).op(p.op));
    const double ratio = static_cast<double>(p.measured_ns) / static_cast<double>(p.predicted_ns);
    std::string tooltip = fmt::format("{} (rank {}): predicted {} ms, measured {} ms ({})", name, p.rank,
                                      milliseconds_text(p.predicted_ns), milliseconds_text(p.measured_ns),
                                      percent_text(ratio));
    if (mark->count > 1) tooltip = fmt::format("{} {} ops here, e.g. {}", mark->count, to_string(p.kind), tooltip);
    svg.rect(kScatterLeft + position(p.predicted_ns) - kMark / 2,
             kScatterTop + kPlot - position(p.measured_ns) - kMark / 2, kMark, kMark, kind_color(p.kind), tooltip);
  }
  if (left_out > 0)
    svg.text(kScatterLeft + 6, kScatterTop + 14, fmt::format("{} marks nearest the diagonal left out", left_out),
             "start", 11, "#8a3b12");
  return svg.str();
}

}  // namespace twin
