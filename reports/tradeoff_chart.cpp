// Only what was simulated or estimated is placed: a pruned candidate's time is its proven lower bound and says so;
// an out-of-memory candidate has a memory estimate but no time, so it sits in a band of its own.
#include "reports/tradeoff_chart.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/svg.hpp"

namespace twin {
namespace {

constexpr double kChartLeft = 64, kChartTop = 30, kPlotWidth = 880, kPlotHeight = 340, kChartBottom = 44;
constexpr double kBandY = 13;  // the out-of-memory band's centre line, above the plot
constexpr const char* kSimulatedColor = "#4e79a7";
constexpr const char* kFrontColor = "#e15759";
constexpr const char* kPrunedColor = "#8a8f98";
constexpr const char* kOutOfMemoryColor = "#b07aa1";

double peak_GiB(const Candidate& c) { return static_cast<double>(c.memory.peak_bytes()) / kGiB; }
double iteration_ms(const Candidate& c) { return static_cast<double>(c.result.iteration_ns) / kNsPerMs; }
bool out_of_memory(const Candidate& c) { return c.infeasible_reason.rfind("out of memory", 0) == 0; }
bool has_memory(const Candidate& c) { return !c.memory.per_stage.empty(); }

struct Axes {
  std::vector<double> x_ticks, y_ticks;
  double x(double GiB) const { return kChartLeft + kPlotWidth * GiB / x_ticks.back(); }
  double y(double ms) const {
    return kChartTop + kPlotHeight * (1 - (ms - y_ticks.front()) / (y_ticks.back() - y_ticks.front()));
  }
};

// Memory from 0 to the largest simulated or pruned candidate's (and the GPU's), and out-of-memory ones up to half
// the GPU's memory beyond it (further ones would squeeze the rest); time over the simulated ones.
Axes axes_of(const std::vector<Candidate>& ranked, double capacity_GiB) {
  double max_GiB = capacity_GiB, low_ms = INFINITY, high_ms = 0;
  for (const Candidate& c : ranked) {
    if (c.feasible || c.pruned) max_GiB = std::max(max_GiB, peak_GiB(c));
    if (out_of_memory(c) && has_memory(c)) max_GiB = std::max(max_GiB, std::min(peak_GiB(c), 1.5 * capacity_GiB));
    if (!c.feasible) continue;
    low_ms = std::min(low_ms, iteration_ms(c));
    high_ms = std::max(high_ms, iteration_ms(c));
  }
  const double pad_ms = std::max((high_ms - low_ms) * 0.05, high_ms * 0.01);
  return {nice_ticks(max_GiB * 1.04, 8), nice_ticks(std::max(0.0, low_ms - pad_ms), high_ms + pad_ms, 6)};
}

void draw_axes(Svg& svg, const Axes& axes, double capacity_GiB) {
  const double right = kChartLeft + kPlotWidth, bottom = kChartTop + kPlotHeight;
  const int x_decimals = tick_decimals(axes.x_ticks.size() > 1 ? axes.x_ticks[1] : 1);
  for (double tick : axes.x_ticks) {
    svg.line(axes.x(tick), kChartTop, axes.x(tick), bottom, "#eceef2");
    svg.text(axes.x(tick), bottom + 16, fixed(tick, x_decimals), "middle", 11, "#555");
  }
  const int y_decimals = tick_decimals(axes.y_ticks.size() > 1 ? axes.y_ticks[1] - axes.y_ticks[0] : 1);
  for (double tick : axes.y_ticks) {
    svg.line(kChartLeft, axes.y(tick), right, axes.y(tick), "#eceef2");
    svg.text(kChartLeft - 6, axes.y(tick) + 4, fixed(tick, y_decimals), "end", 11, "#555");
  }
  svg.line(kChartLeft, bottom, right, bottom, "#888");
  svg.line(kChartLeft, kChartTop, kChartLeft, bottom, "#888");
  svg.text(kChartLeft + kPlotWidth / 2, bottom + 34, "peak memory per GPU (GiB)", "middle", 12);
  svg.text(kChartLeft - 6, kChartTop - 8, "iteration (ms)", "end", 12);
  svg.text(kChartLeft + 4, kBandY + 4, "out of memory (not simulated):", "start", 11, "#555");
  if (capacity_GiB > 0) {
    svg.line(axes.x(capacity_GiB), kBandY - 8, axes.x(capacity_GiB), bottom, "#c0392b", 1.5, true);
    svg.text(axes.x(capacity_GiB) - 4, bottom - 6, fmt::format("GPU memory {} GiB", fixed(capacity_GiB, 1)), "end",
             11, "#c0392b");
  }
}

}  // namespace

std::vector<std::size_t> pareto_front(const std::vector<Candidate>& ranked) {
  std::vector<std::size_t> simulated;
  for (std::size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].feasible) simulated.push_back(i);
  // By memory, then time: a candidate is on the front when it is faster than every one before it (an equal
  // twin of a front point is on it too).
  std::stable_sort(simulated.begin(), simulated.end(), [&](std::size_t a, std::size_t b) {
    const Bytes ma = ranked[a].memory.peak_bytes(), mb = ranked[b].memory.peak_bytes();
    return ma != mb ? ma < mb : ranked[a].result.iteration_ns < ranked[b].result.iteration_ns;
  });
  std::vector<std::size_t> front;
  for (std::size_t i : simulated) {
    const Candidate& c = ranked[i];
    if (!front.empty()) {
      const Candidate& last = ranked[front.back()];
      const bool twin = last.memory.peak_bytes() == c.memory.peak_bytes() && last.result.iteration_ns == c.result.iteration_ns;
      if (!twin && c.result.iteration_ns >= last.result.iteration_ns) continue;
    }
    front.push_back(i);
  }
  return front;
}

std::string tradeoff_svg(const std::vector<Candidate>& ranked, const std::vector<std::size_t>& front,
                         const std::vector<long>& row_of, double capacity_GiB) {
  if (front.empty()) return {};
  const Axes axes = axes_of(ranked, capacity_GiB);
  Svg svg(kChartLeft + kPlotWidth + 16, kChartTop + kPlotHeight + kChartBottom,
          "iteration time against peak memory per GPU");
  svg.fit_to_content();
  draw_axes(svg, axes, capacity_GiB);
  const double right = kChartLeft + kPlotWidth, top_ms = axes.y_ticks.back();
  const auto row = [&](std::size_t i) { return i < row_of.size() ? row_of[i] : -1L; };
  std::size_t beyond = 0;  // out-of-memory candidates past the axis, drawn on its end
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const Candidate& c = ranked[i];
    if (!has_memory(c)) continue;
    const double x = std::min(axes.x(peak_GiB(c)), right);
    if (c.pruned) {
      const double bound_ms = static_cast<double>(c.lower_bound_ns) / kNsPerMs;
      if (bound_ms <= top_ms) svg.circle(x, axes.y(bound_ms), 3, "none", kPrunedColor, row(i));
      else
        svg.polygon({{x - 3.5, kChartTop + 5}, {x + 3.5, kChartTop + 5}, {x, kChartTop - 1}}, "none", kPrunedColor,
                    row(i));
    } else if (!c.feasible && out_of_memory(c)) {
      beyond += axes.x(peak_GiB(c)) > right ? 1 : 0;
      svg.polygon({{x, kBandY - 4}, {x + 4, kBandY}, {x, kBandY + 4}, {x - 4, kBandY}}, kOutOfMemoryColor, "none",
                  row(i));
    }
  }
  if (beyond > 0) svg.text(right + 8, kBandY + 4, fmt::format("{} beyond", beyond), "start", 11, "#555");
  for (std::size_t i = 0; i < ranked.size(); ++i)
    if (ranked[i].feasible && has_memory(ranked[i]))
      svg.circle(axes.x(peak_GiB(ranked[i])), axes.y(iteration_ms(ranked[i])), 3.5, kSimulatedColor, "#fff", row(i));
  // The front as a staircase: from each point along its memory to the next point's, then down to its time.
  std::vector<std::pair<double, double>> steps;
  for (std::size_t f = 0; f < front.size(); ++f) {
    const double x = axes.x(peak_GiB(ranked[front[f]])), y = axes.y(iteration_ms(ranked[front[f]]));
    if (f > 0) steps.push_back({x, steps.back().second});
    steps.push_back({x, y});
  }
  steps.push_back({right, steps.back().second});
  svg.polyline(steps, kFrontColor, 1.5);
  for (std::size_t i : front)
    svg.circle(axes.x(peak_GiB(ranked[i])), axes.y(iteration_ms(ranked[i])), 5, kFrontColor, "#fff", row(i));
  return svg.str();
}

std::string tradeoff_section_html(const std::vector<Candidate>& ranked, const std::vector<long>& row_of,
                                  double capacity_GiB) {
  const std::vector<std::size_t> front = pareto_front(ranked);
  if (front.empty()) return {};
  std::size_t simulated = 0, pruned = 0, oom = 0, unplaced = 0;
  for (const Candidate& c : ranked) {
    if (!has_memory(c)) ++unplaced;
    else if (c.feasible) ++simulated;
    else if (c.pruned) ++pruned;
    else if (out_of_memory(c)) ++oom;
    else ++unplaced;
  }
  std::string html = "<section id=\"tradeoffs\">\n<h2>Time against memory: every candidate</h2>\n";
  html += fmt::format(
      "<div class=\"legend\"><span><i style=\"background:{}\"></i>simulated ({})</span><span><i class=\"front\"></i>"
      "Pareto front ({}): nothing is both faster and lighter</span><span><i class=\"ring\"></i>not simulated ({}): at "
      "its lower bound, at least this long (▲ above the chart)</span><span><i class=\"diamond\"></i>out of memory "
      "({})</span><span><i class=\"dashed\"></i>GPU memory</span></div>\n",
      kSimulatedColor, simulated, front.size(), pruned, oom);
  html += "<div class=\"chart\">" + tradeoff_svg(ranked, front, row_of, capacity_GiB) + "</div>\n";
  html += "<p class=\"note\">Hover a point for its plan; click it to find it in the ranking below." +
          (unplaced > 0 ? fmt::format(" {} invalid candidates have no memory estimate and are not drawn.", unplaced)
                        : std::string()) +
          "</p>\n<table class=\"front\">\n<tr><th>place</th><th>strategy</th><th>iteration (ms)</th>"
          "<th>peak memory (GiB)</th><th>tokens/s</th><th>MFU</th></tr>\n";
  std::vector<std::size_t> by_place = front;
  std::sort(by_place.begin(), by_place.end());  // ranked is fastest first
  for (std::size_t i : by_place) {
    const Candidate& c = ranked[i];
    html += fmt::format("<tr><td class=\"num\">{}</td><td class=\"key\">{}</td><td class=\"num\">{}</td>"
                        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}%</td></tr>\n",
                        i + 1, escape_html(c.key()), milliseconds_text(c.result.iteration_ns),
                        gib_text(c.memory.peak_bytes(), 1), grouped(c.throughput.tokens_per_s),
                        fixed(100 * c.throughput.mfu, 1));
  }
  return html + "</table>\n</section>\n";
}

}  // namespace twin
