// Binning: each lane accumulates, per pixel column, how much of the column each family covers; a column
// takes the colour of its largest family (a thin bar where ops cover under a fifth of it), and runs of
// equal columns become one rect. The element count
// is thus bounded by lanes x plot width whatever the number of ops, while ops wider than a pixel keep
// their own rect and tooltip.
#include "reports/timeline_svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/op_kinds.hpp"
#include "reports/format.hpp"
#include "reports/svg.hpp"

namespace twin {

OpFamily op_family(const Op& op) {
  if (op.is_communication()) {
    switch (op.group) {
      case GroupKind::tensor: return OpFamily::tp_comm;
      case GroupKind::context: return OpFamily::cp_comm;
      case GroupKind::expert:
      case GroupKind::expert_tensor: return OpFamily::ep_comm;  // the dispatcher's gathers and scatters around its all-to-all
      case GroupKind::pipeline: return OpFamily::pp_p2p;
      case GroupKind::data:
      case GroupKind::expert_data:
      case GroupKind::embedding:
      case GroupKind::amax: return OpFamily::dp_comm;
      case GroupKind::none: break;
    }
    return op.kind == OpKind::send || op.kind == OpKind::recv ? OpFamily::pp_p2p : OpFamily::dp_comm;
  }
  if (op.kind == OpKind::optimizer_step) return OpFamily::optimizer;
  switch (op_kind_traits(op.kind).pricing) {
    case OpPricing::gemm: return OpFamily::gemm;
    case OpPricing::attention: return OpFamily::attention;
    case OpPricing::memory_bound:
    case OpPricing::collective:  // communication was taken above
    case OpPricing::point_to_point: return OpFamily::memory_bound;
  }
  return OpFamily::memory_bound;
}

std::string family_name(OpFamily family) {
  static const std::array<const char*, kOpFamilyCount> names = {
      "GEMM", "attention", "memory-bound", "TP comm", "DP comm", "PP p2p", "CP comm", "EP comm", "optimizer"};
  return names[static_cast<int>(family)];
}

std::string family_color(OpFamily family) {
  // Tableau 10: distinguishable, and print-friendly.
  static const std::array<const char*, kOpFamilyCount> colors = {"#4e79a7", "#76b7b2", "#edc948", "#f28e2b", "#e15759",
                                                                 "#59a14f", "#b07aa1", "#ff9da7", "#9c755f"};
  return colors[static_cast<int>(family)];
}

std::string family_legend_html() {
  std::string html = "<div class=\"legend\">";
  for (int f = 0; f < kOpFamilyCount; ++f) {
    const auto family = static_cast<OpFamily>(f);
    html += "<span><i style=\"background:" + family_color(family) + "\"></i>" + escape_html(family_name(family)) +
            "</span>";
  }
  return html + "</div>";
}

namespace {

constexpr double kLabelWidth = 200, kRightMargin = 20, kTop = 6, kLaneHeight = 16, kAxisHeight = 40;
// A column less covered than this is drawn as a thin bar: mostly idle is what a reader should see, yet
// a stream whose ops are all short and sparse (TP collectives over a long iteration) must still show.
constexpr double kMinColumnCoverage = 0.2;
constexpr int kSparse = 100;  // added to a column's family when it is below kMinColumnCoverage
constexpr double kSparseHeight = 4;

struct Lane {
  int class_index = 0;
  Stream stream = Stream::compute;
  std::vector<OpIndex> ops;  // by start time
};

std::vector<Lane> lanes_of(const IterationGraph& graph, const IterationResult& result, int only_class) {
  std::vector<Lane> lanes;
  for (const RankClass& rank_class : graph.classes) {
    if (only_class >= 0 && rank_class.index != only_class) continue;
    std::array<std::vector<OpIndex>, kStreamCount> by_stream;
    for (OpIndex i = 0; i < rank_class.size(); ++i) by_stream[static_cast<int>(rank_class.op(i).stream)].push_back(i);
    const auto& timings = result.classes[rank_class.index].op_timings;
    // The second compute stream (double strand) sits right under the first.
    std::array<int, kStreamCount> display_order{};
    for (int s = 0, next = 0; s < kStreamCount; ++s) {
      if (static_cast<Stream>(s) == Stream::compute2) continue;
      display_order[next++] = s;
      if (static_cast<Stream>(s) == Stream::compute) display_order[next++] = static_cast<int>(Stream::compute2);
    }
    for (int s : display_order) {
      if (by_stream[s].empty()) continue;
      std::stable_sort(by_stream[s].begin(), by_stream[s].end(),
                       [&](OpIndex a, OpIndex b) { return timings[a].start_ns < timings[b].start_ns; });
      lanes.push_back({rank_class.index, static_cast<Stream>(s), std::move(by_stream[s])});
    }
  }
  return lanes;
}

std::string ms(TimeNs ns) { return milliseconds_text(ns); }

std::string run_tooltip(const RankClass& rank_class, const std::vector<OpTiming>& timings,
                        const std::vector<OpIndex>& ops, std::size_t first, std::size_t last) {
  if (first + 1 == last) {
    const OpTiming& t = timings[ops[first]];
    return fmt::format("{} · {} ms (at {} ms)", op_name(rank_class.op(ops[first])), ms(t.end_ns - t.start_ns),
                       ms(t.start_ns));
  }
  TimeNs busy_ns = 0;
  for (std::size_t i = first; i < last; ++i) busy_ns += timings[ops[i]].end_ns - timings[ops[i]].start_ns;
  return fmt::format("{} ops, {} ms busy, {}–{} ms: {} … {}", last - first, ms(busy_ns),
                     ms(timings[ops[first]].start_ns), ms(timings[ops[last - 1]].end_ns),
                     op_name(rank_class.op(ops[first])), op_name(rank_class.op(ops[last - 1])));
}

void draw_lane(Svg& svg, const RankClass& rank_class, const std::vector<OpTiming>& timings, const Lane& lane,
               double y, int width_px, double px_per_ns, bool tooltips) {
  std::vector<std::array<double, kOpFamilyCount>> cover(static_cast<std::size_t>(width_px));
  for (std::size_t c = 0; c < cover.size(); ++c) cover[c].fill(0.0);
  for (OpIndex i : lane.ops) {
    const double x0 = timings[i].start_ns * px_per_ns, x1 = timings[i].end_ns * px_per_ns;
    const int family = static_cast<int>(op_family(rank_class.op(i)));
    const int last_column = std::min(width_px - 1, static_cast<int>(std::ceil(x1)) - 1);
    for (int c = std::max(0, static_cast<int>(std::floor(x0))); c <= last_column; ++c)
      cover[c][family] += std::min(x1, c + 1.0) - std::max(x0, static_cast<double>(c));
  }
  std::vector<int> column_family(cover.size(), -1);
  for (std::size_t c = 0; c < cover.size(); ++c) {
    double total = 0;
    int best = 0;
    for (int f = 0; f < kOpFamilyCount; ++f) {
      total += cover[c][f];
      if (cover[c][f] > cover[c][best]) best = f;
    }
    if (total > 0) column_family[c] = best + (total >= kMinColumnCoverage ? 0 : kSparse);
  }
  std::size_t next_op = 0;  // ops ending before the current run are done
  for (int a = 0; a < width_px;) {
    int b = a + 1;
    while (b < width_px && column_family[b] == column_family[a]) ++b;
    if (column_family[a] >= 0) {
      while (next_op < lane.ops.size() && timings[lane.ops[next_op]].end_ns * px_per_ns <= a) ++next_op;
      std::size_t end_op = next_op;
      while (end_op < lane.ops.size() && timings[lane.ops[end_op]].start_ns * px_per_ns < b) ++end_op;
      const std::string tooltip =
          tooltips && end_op > next_op ? run_tooltip(rank_class, timings, lane.ops, next_op, end_op) : "";
      const bool sparse = column_family[a] >= kSparse;
      const double height = sparse ? kSparseHeight : kLaneHeight - 4;
      svg.rect(kLabelWidth + a, y + (kLaneHeight - height) / 2, b - a, height,
               family_color(static_cast<OpFamily>(column_family[a] % kSparse)), tooltip);
    }
    a = b;
  }
}

}  // namespace

std::string timeline_svg(const IterationGraph& graph, const IterationResult& result, const TimelineOptions& options) {
  if (result.classes.size() != graph.classes.size())
    throw std::invalid_argument("timeline_svg: the result has a different number of rank classes than the graph");
  TimeNs end_ns = result.iteration_ns;
  for (const RankClass& rank_class : graph.classes) {
    const auto& timings = result.classes[rank_class.index].op_timings;
    if (timings.size() != rank_class.size())
      throw std::invalid_argument(fmt::format("timeline_svg: no op timings for class {}", rank_class.index));
    for (const OpTiming& t : timings) end_ns = std::max(end_ns, t.end_ns);
  }
  end_ns = std::max<TimeNs>({end_ns, options.axis_end_ns, 1});

  std::vector<Lane> lanes = lanes_of(graph, result, options.only_class);
  const std::size_t omitted = lanes.size() > static_cast<std::size_t>(options.max_lanes)
                                  ? lanes.size() - static_cast<std::size_t>(options.max_lanes)
                                  : 0;
  lanes.resize(lanes.size() - omitted);

  const int width_px = std::max(100, options.plot_width_px);
  const double plot_bottom = kTop + kLaneHeight * static_cast<double>(lanes.size());
  Svg svg(kLabelWidth + width_px + kRightMargin, plot_bottom + kAxisHeight + (omitted > 0 ? 16 : 0),
          "timeline of one iteration");
  svg.fit_to_content();

  for (std::size_t l = 0; l < lanes.size(); ++l) {  // class bands first, so everything draws over them
    const bool shaded = lanes[l].class_index % 2 == 0;
    if (shaded) svg.rect(0, kTop + kLaneHeight * l, kLabelWidth + width_px, kLaneHeight, "#f3f4f7");
    if (l > 0 && lanes[l].class_index != lanes[l - 1].class_index)
      svg.line(0, kTop + kLaneHeight * l, kLabelWidth + width_px, kTop + kLaneHeight * l, "#c8ccd4");
  }
  const double end_ms = static_cast<double>(end_ns) / kNsPerMs;
  const std::vector<double> ticks = nice_ticks(end_ms, 10);
  const int decimals = ticks.size() > 1 ? tick_decimals(ticks[1]) : 0;
  for (double tick : ticks) {
    const double x = kLabelWidth + tick / end_ms * width_px;
    svg.line(x, kTop, x, plot_bottom + 4, "#dde0e6");
    svg.text(x, plot_bottom + 17, fixed(tick, decimals), "middle", 11, "#555");
  }
  svg.text(kLabelWidth + width_px / 2.0, plot_bottom + 34, "time (ms)", "middle", 12, "#333");

  const double px_per_ns = width_px / static_cast<double>(end_ns);
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    const RankClass& rank_class = graph.classes[lanes[l].class_index];
    const double y = kTop + kLaneHeight * l;
    const std::string label = rank_class.label.empty() ? fmt::format("class {}", rank_class.index) : rank_class.label;
    svg.text(kLabelWidth - 8, y + 12, fmt::format("{} · {}", label, to_string(lanes[l].stream)), "end", 11);
    draw_lane(svg, rank_class, result.classes[rank_class.index].op_timings, lanes[l], y, width_px, px_per_ns,
              options.op_tooltips);
  }
  if (omitted > 0)
    svg.text(kLabelWidth, plot_bottom + kAxisHeight + 10,
             fmt::format("{} more lanes not shown: open the Chrome trace for every rank class", omitted), "start", 11,
             "#a33");
  return svg.str();
}

}  // namespace twin
