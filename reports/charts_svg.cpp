// Both charts share one scale per chart so bars compare by length; values sit in tooltips for exact reading.
#include "reports/charts_svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/svg.hpp"

namespace twin {
namespace {

struct Part {
  const char* name;
  const char* color;
};

constexpr std::array<Part, 6> kMemoryParts = {{{"parameters", "#4e79a7"},
                                               {"gradients", "#f28e2b"},
                                               {"optimizer states", "#e15759"},
                                               {"activations", "#76b7b2"},
                                               {"communication buffers", "#edc948"},
                                               {"workspace", "#bab0ac"}}};

constexpr std::array<Part, 4> kTimeParts = {{{"compute", "#4e79a7"},
                                             {"exposed communication", "#f28e2b"},
                                             {"pipeline bubble", "#bab0ac"},
                                             {"optimizer", "#9c755f"}}};

template <std::size_t N>
std::string legend_html(const std::array<Part, N>& parts) {
  std::string html = "<div class=\"legend\">";
  for (const Part& part : parts)
    html += std::string("<span><i style=\"background:") + part.color + "\"></i>" + escape_html(part.name) + "</span>";
  return html + "</div>";
}

std::array<Bytes, 6> memory_parts(const MemoryBreakdown& m) {
  return {m.parameters, m.gradients, m.optimizer_states, m.activations, m.communication_buffers, m.workspace};
}

std::array<TimeNs, 4> time_parts(const TimeBreakdown& b) {
  return {b.compute_ns, b.exposed_communication_ns, b.bubble_ns, b.optimizer_ns};
}

}  // namespace

std::string memory_legend_html() {
  std::string html = legend_html(kMemoryParts);
  const std::string capacity = "<span><i class=\"dashed\"></i>GPU memory</span>";
  return html.insert(html.size() - std::string("</div>").size(), capacity);
}
std::string time_legend_html() { return legend_html(kTimeParts); }

std::string memory_chart_svg(const MemoryEstimate& memory, const std::vector<double>& capacity_GiB) {
  constexpr double kLeft = 60, kTop = 12, kPlotHeight = 260, kBottom = 44, kRight = 16;
  const std::size_t stages = memory.per_stage.size();
  // At least 360 px wide so that the axis title fits; a bar never wider than 60% of 90 px.
  const double slot = std::clamp(640.0 / std::max<std::size_t>(stages, 1), 14.0, 90.0);
  const double plot_width = std::max(360.0, slot * static_cast<double>(std::max<std::size_t>(stages, 1)));
  const double left_pad = (plot_width - slot * static_cast<double>(stages)) / 2;  // centres few bars
  double max_GiB = 0;
  for (std::size_t s = 0; s < stages; ++s) {
    max_GiB = std::max(max_GiB, static_cast<double>(memory.per_stage[s].total()) / kGiB);
    if (s < capacity_GiB.size()) max_GiB = std::max(max_GiB, capacity_GiB[s]);
  }
  const std::vector<double> ticks = nice_ticks(max_GiB * 1.05, 6);
  const double top_GiB = std::max(ticks.back(), 1e-9);
  const auto y_of = [&](double GiB) { return kTop + kPlotHeight * (1 - GiB / top_GiB); };

  Svg svg(kLeft + plot_width + kRight, kTop + kPlotHeight + kBottom, "memory per pipeline stage");
  svg.fit_to_content();
  const int decimals = ticks.size() > 1 ? tick_decimals(ticks[1]) : 0;
  for (double tick : ticks) {
    svg.line(kLeft, y_of(tick), kLeft + plot_width, y_of(tick), "#e3e6eb");
    svg.text(kLeft - 6, y_of(tick) + 4, fixed(tick, decimals), "end", 11, "#555");
  }
  svg.text(14, kTop + kPlotHeight / 2, "GiB", "middle", 12);
  const std::size_t label_every = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(36.0 / slot)));
  for (std::size_t s = 0; s < stages; ++s) {
    const double slot_x = kLeft + left_pad + slot * static_cast<double>(s);
    const double x = slot_x + slot * 0.2, bar_width = slot * 0.6;
    double stacked_GiB = 0;
    const auto parts = memory_parts(memory.per_stage[s]);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const double GiB = static_cast<double>(parts[p]) / kGiB;
      if (GiB <= 0) continue;
      svg.rect(x, y_of(stacked_GiB + GiB), bar_width, y_of(stacked_GiB) - y_of(stacked_GiB + GiB), kMemoryParts[p].color,
               fmt::format("stage {} {}: {} GiB", s, kMemoryParts[p].name, fixed(GiB, 2)));
      stacked_GiB += GiB;
    }
    if (s < capacity_GiB.size() && capacity_GiB[s] > 0)
      svg.line(slot_x + 2, y_of(capacity_GiB[s]), slot_x + slot - 2, y_of(capacity_GiB[s]), "#c0392b", 2, true);
    if (s % label_every == 0)
      svg.text(x + bar_width / 2, kTop + kPlotHeight + 16, fmt::format("{}", s), "middle", 11, "#555");
  }
  svg.line(kLeft, kTop + kPlotHeight, kLeft + plot_width, kTop + kPlotHeight, "#888");
  svg.text(kLeft + plot_width / 2, kTop + kPlotHeight + 36, "pipeline stage (dashed: GPU memory)", "middle", 12);
  return svg.str();
}

std::string time_breakdown_svg(const std::vector<const Candidate*>& candidates) {
  // Each row: its place and plan key on a line of its own above its bar, whole whatever its length (a heterogeneous
  // plan's key runs to hundreds of characters); the report's script fits the chart to the longest (data-fit).
  constexpr double kPlotWidth = 720, kLabelHeight = 15, kBarHeight = 16, kRowGap = 8, kTop = 4, kRight = 90, kAxis = 36;
  constexpr double kRowHeight = kLabelHeight + kBarHeight + kRowGap;
  TimeNs max_ns = 1;
  for (const Candidate* candidate : candidates)
    max_ns = std::max(max_ns, candidate->result.breakdown.total_ns());
  const double max_ms = static_cast<double>(max_ns) / kNsPerMs;
  const std::vector<double> ticks = nice_ticks(max_ms, 6);
  const double top_ms = std::max(ticks.back(), max_ms);
  const double plot_bottom = kTop + kRowHeight * static_cast<double>(candidates.size());

  Svg svg(kPlotWidth + kRight, plot_bottom + kAxis, "time breakdown of the top candidates");
  svg.fit_to_content();
  const int decimals = ticks.size() > 1 ? tick_decimals(ticks[1]) : 0;
  for (double tick : ticks) {
    const double x = tick / top_ms * kPlotWidth;
    svg.line(x, kTop, x, plot_bottom + 4, "#e3e6eb");
    svg.text(x, plot_bottom + 17, fixed(tick, decimals), "middle", 11, "#555");
  }
  svg.text(kPlotWidth / 2, plot_bottom + 32, "iteration time (ms)", "middle", 12);
  for (std::size_t row = 0; row < candidates.size(); ++row) {
    const Candidate& candidate = *candidates[row];
    const double y = kTop + kRowHeight * static_cast<double>(row);
    svg.text(0, y + 11, fmt::format("{}. {}", row + 1, candidate.key()), "start", 11);
    double x = 0;
    const auto parts = time_parts(candidate.result.breakdown);
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const double width = static_cast<double>(parts[p]) / kNsPerMs / top_ms * kPlotWidth;
      if (parts[p] <= 0) continue;
      svg.rect(x, y + kLabelHeight, width, kBarHeight, kTimeParts[p].color,
               fmt::format("{}: {} ms", kTimeParts[p].name, milliseconds_text(parts[p])));
      x += width;
    }
    svg.text(x + 6, y + kLabelHeight + 12, milliseconds_text(candidate.result.breakdown.total_ns()) + " ms", "start", 11,
             "#555");
  }
  return svg.str();
}

}  // namespace twin
