// Assembled from escaped fragments like report.html, with the same look; tables are plain HTML and the
// two pictures come from execution_charts. Nothing here names an absolute path, so a copied run folder
// gives the same bytes.
#include "reports/execution_report.hpp"

#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "reports/execution_charts.hpp"
#include "reports/format.hpp"
#include "reports/page_style.hpp"

namespace twin {
namespace {

const std::string kExecutionStyle =
    std::string("<style>\n") + kPageStyle +
    R"(.table-scroll { overflow-x: auto; max-height: 640px; overflow-y: auto; border: 1px solid #e3e6eb; border-radius: 6px; }
table.data { border-collapse: collapse; font-size: 12.5px; width: 100%; }
.data th { position: sticky; top: 0; background: #f6f8fa; text-align: left; padding: 5px 6px;
           border-bottom: 2px solid #d0d7de; white-space: nowrap; }
.data td { padding: 3px 6px; border-bottom: 1px solid #eaeef2; white-space: nowrap; }
.data td.num { text-align: right; font-variant-numeric: tabular-nums; }
.data tr:nth-child(even) { background: #fafbfc; }
.data tr.warmup { color: #6e7781; }
.data i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; }
.note { color: #59636e; font-size: 13px; }
footer { margin-top: 36px; color: #59636e; font-size: 13px; }
</style>
)";

std::string signed_percent(const std::optional<double>& error) {
  if (!error) return "–";
  return (*error >= 0 ? "+" : "") + fixed(100.0 * *error, 1) + "%";
}
std::string signed_ms(TimeNs ns) { return (ns >= 0 ? "+" : "") + milliseconds_text(ns); }
std::string loss_text(const std::optional<double>& loss) { return loss ? fixed(*loss, 3) : "–"; }

// A table row of cells; cells starting with '#' are numbers (right-aligned), the mark removed.
std::string row(const std::vector<std::string>& cells, const char* row_class = nullptr) {
  std::string html = row_class ? fmt::format("<tr class=\"{}\">", row_class) : "<tr>";
  for (const std::string& cell : cells)
    html += !cell.empty() && cell[0] == '#' ? "<td class=\"num\">" + cell.substr(1) + "</td>" : "<td>" + cell + "</td>";
  return html + "</tr>\n";
}
std::string num(const std::string& text) { return "#" + escape_html(text); }
std::string table(const std::vector<std::string>& header, const std::string& rows) {
  std::string html = "<div class=\"table-scroll\"><table class=\"data\">\n<thead><tr>";
  for (const std::string& name : header) html += "<th>" + escape_html(name) + "</th>";
  return html + "</tr></thead>\n<tbody>\n" + rows + "</tbody></table></div>\n";
}
std::string swatch(OpKind kind) {
  return "<i style=\"background:" + kind_color(kind) + "\"></i>" + escape_html(to_string(kind));
}

std::string header_html(const ExecutedRun& run) {
  const RunMetrics& m = run.metrics;
  std::string html = "<header>\n<h1>" + escape_html("Predicted against measured: " + m.scenario) + "</h1>\n";
  html += "<dl class=\"facts\">\n";
  const auto fact = [&](const char* name, const std::string& value) {
    html += std::string("<dt>") + name + "</dt><dd>" + escape_html(value) + "</dd>\n";
  };
  int measured_steps = 0;
  for (const StepMetrics& step : m.steps) measured_steps += step.measured;
  fact("strategy", m.strategy);
  fact("device", fmt::format("{} × {}", m.world_size, m.device));
  fact("profile", run.plan.profile.empty() ? run.plan.scenario.profile : run.plan.profile);
  fact("steps", fmt::format("{} ({} warm-up, {} measured)", m.steps.size(), m.warmup_iterations, measured_steps));
  fact("loss", fmt::format("{} → {} (first to last step)", loss_text(m.loss_first), loss_text(m.loss_last)));
  return html + "</dl>\n</header>\n";
}

std::string cards_html(const ExecutedRun& run, const ExecutionSummary& s) {
  const auto card = [](const std::string& value, const std::string& label) {
    return "<div class=\"card\"><b>" + escape_html(value) + "</b><span>" + escape_html(label) + "</span></div>";
  };
  std::string html = "<div class=\"cards\">";
  html += card(milliseconds_text(s.predicted_iteration_ns) + " ms", "predicted iteration");
  html += card(milliseconds_text(s.measured_iteration_ns) + " ms", "measured iteration (median)");
  html += card(signed_percent(s.error), "error (measured / predicted − 1)");
  html += card(percent_label(run.metrics.measured_mfu),
               "measured MFU (predicted " + percent_label(run.predicted_mfu) + ")");
  html += card(grouped(run.metrics.measured_tokens_per_s), "tokens/s (predicted " + grouped(run.predicted_tokens_per_s) + ")");
  html += card(loss_text(run.metrics.loss_first) + " → " + loss_text(run.metrics.loss_last), "loss, first → last");
  return html + "</div>\n";
}

std::string headline_html(const ExecutionSummary& s) {
  std::string text = fmt::format("One iteration measured {} ms (the median of the measured steps) against {} ms "
                                 "predicted: {}.",
                                 milliseconds_text(s.measured_iteration_ns), milliseconds_text(s.predicted_iteration_ns),
                                 signed_percent(s.error));
  if (s.measured_kernel_span_ns)
    text += fmt::format(" From the first kernel to the last, the GPU spent {} ms per iteration.",
                        milliseconds_text(*s.measured_kernel_span_ns));
  if (!s.kinds.empty())
    text += fmt::format(" By op kind, {} moves the most ({} ms);", to_string(s.kinds.front().kind),
                        signed_ms(s.kinds.front().error_contribution_ns()));
  if (!s.contributors.empty())
    text += fmt::format(" by op group, {} {} ({} ms).", s.contributors.front().label(), to_string(s.contributors.front().kind),
                        signed_ms(s.contributors.front().difference_ns()));
  return "<p>" + escape_html(text) + "</p>\n";
}

std::string steps_html(const ExecutionSummary& s) {
  std::string rows;
  for (const StepComparison& step : s.steps)
    rows += row({num(std::to_string(step.step)), num(loss_text(step.loss)), num(milliseconds_text(step.measured_ns)),
                 num(milliseconds_text(step.predicted_ns)), num(signed_percent(step.error)),
                 step.warmup ? "warm-up" : "measured"},
                step.warmup ? "warmup" : nullptr);
  return table({"step", "loss", "measured ms", "predicted ms", "error", ""}, rows);
}

std::string kinds_html(const ExecutionSummary& s) {
  std::string rows;
  for (const KindComparison& k : s.kinds)
    rows += row({swatch(k.kind), num(std::to_string(k.ops)), num(milliseconds_text(k.predicted_ns)),
                 num(milliseconds_text(k.measured_ns)), num(signed_ms(k.error_contribution_ns())),
                 num(signed_percent(k.error)),
                 num(signed_percent(static_cast<double>(k.error_contribution_ns()) /
                                    std::max<double>(1, s.predicted_iteration_ns))),
                 num(k.unmeasured_ops ? fmt::format("{} ({} ms)", k.unmeasured_ops,
                                                    milliseconds_text(k.unmeasured_predicted_ns))
                                      : "–")});
  return table({"kind", "ops", "predicted ms", "measured ms", "difference ms", "error", "of the iteration",
                "ops without a kernel (predicted)"},
               rows);
}

std::string collectives_html(const ExecutionSummary& s) {
  if (s.collectives.empty())
    return "<p class=\"note\">This plan runs no collective or point-to-point op: nothing to compare.</p>\n";
  std::string rows;
  for (const CollectiveComparison& c : s.collectives)
    rows += row({swatch(c.kind), escape_html(to_string(c.group)), num(std::to_string(c.ops)),
                 num(fixed(static_cast<double>(c.bytes) / (1024.0 * 1024.0), 1)), num(milliseconds_text(c.predicted_ns)),
                 num(milliseconds_text(c.measured_ns)), num(signed_ms(c.measured_ns - c.predicted_ns)),
                 num(signed_percent(c.error)), num(std::to_string(c.unmeasured_ops))});
  return table({"collective", "communicator", "ops", "MiB", "predicted ms", "measured ms", "difference ms", "error",
                "without a kernel"},
               rows);
}

std::string ranks_html(const ExecutionSummary& s) {
  std::string rows;
  for (const RankRow& r : s.ranks)
    rows += row({num(std::to_string(r.rank)), num(std::to_string(r.rank_class)), num(milliseconds_text(r.predicted_ns)),
                 num(r.measured_span_ns ? milliseconds_text(*r.measured_span_ns) : "–"), num(signed_percent(r.error)),
                 num(milliseconds_text(r.median_step_ns)), num(fixed(r.predicted_peak_memory_GiB, 2)),
                 num(fixed(r.peak_memory_GiB, 2))});
  return table({"rank", "class", "predicted finish ms", "measured kernel span ms", "error", "measured step ms",
                "predicted peak GiB", "measured peak GiB"},
               rows);
}

std::string contributors_html(const ExecutionSummary& s) {
  std::string rows;
  for (const ContributorGroup& g : s.contributors)
    rows += row({swatch(g.kind), escape_html(g.label()), num(std::to_string(g.ops)),
                 num(milliseconds_text(g.predicted_ns)), num(milliseconds_text(g.measured_ns)),
                 num(signed_ms(g.difference_ns())),
                 num(signed_percent(static_cast<double>(g.difference_ns()) /
                                    std::max<double>(1, s.predicted_iteration_ns)))});
  return table({"kind", "ops (layer.role.phase, every micro-batch)", "ops", "predicted ms", "measured ms", "difference ms",
                "of the iteration"},
               rows);
}

}  // namespace

std::string execution_report_html(const ExecutedRun& run, const ExecutionSummary& summary) {
  const std::vector<OpPoint> points = op_points(run.graph, run.prediction, run.ranks);
  const int timeline_class = run.measured_iteration ? run.measured_iteration->rank_class : run.ranks.front().rank_class;
  std::set<OpKind> present;
  for (const OpPoint& p : points) present.insert(p.kind);
  const RankClass& shown = run.graph.classes.at(static_cast<std::size_t>(timeline_class));
  for (OpIndex i = 0; i < shown.size(); ++i) present.insert(shown.op(i).kind);
  const std::string legend = kind_legend_html(std::vector<OpKind>(present.begin(), present.end()));

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<title>" + escape_html("twin report: " + run.metrics.scenario) + "</title>\n" + kExecutionStyle +
          "</head>\n<body>\n<main>\n";
  html += header_html(run);
  html += "<section id=\"headline\">\n" + cards_html(run, summary) + headline_html(summary) + "</section>\n";

  html += "<section id=\"scatter\">\n<h2>Op by op: measured against predicted</h2>\n" + legend +
          "\n<div class=\"chart\">" + op_scatter_svg(run.graph, points) + "</div>\n";
  html += "<p class=\"note\">One mark per op and rank (log-log). Above the dashed diagonal an op ran slower than "
          "predicted, below it faster. Hover a mark for the op.</p>\n</section>\n";

  html += "<section id=\"timelines\">\n<h2>One iteration, simulated and measured</h2>\n" + legend +
          "\n<div class=\"chart\">" +
          dual_timeline_svg(run.graph, run.prediction, timeline_class,
                            run.measured_iteration ? &*run.measured_iteration : nullptr) +
          "</div>\n";
  html += run.measured_iteration
              ? "<p class=\"note\">The measured iteration is shifted to start at 0; one lane per CUDA stream, one "
                "bar per kernel, coloured by the kind of the op it ran for.</p>\n"
              : "<p class=\"note\">This run folder holds no measured trace (" +
                    escape_html(std::filesystem::relative(run.measured_trace, run.dir).generic_string()) +
                    "), so only the simulated timeline is shown.</p>\n";
  html += "</section>\n";

  html += "<section id=\"contributors\">\n<h2>Largest contributors to the difference</h2>\n" +
          contributors_html(summary) + "</section>\n";
  html += "<section id=\"kinds\">\n<h2>Per op kind</h2>\n" + kinds_html(summary) +
          fmt::format("<p class=\"note\">Sums of each op's median over the measured iterations, on every measured "
                      "rank: {} ms predicted, {} ms measured. Errors come from the sums.</p>\n",
                      milliseconds_text(summary.measured_op_predicted_ns),
                      milliseconds_text(summary.measured_op_measured_ns)) +
          "</section>\n";
  html += "<section id=\"collectives\">\n<h2>Per collective</h2>\n" + collectives_html(summary) + "</section>\n";
  html += "<section id=\"ranks\">\n<h2>Per rank</h2>\n" + ranks_html(summary) + "</section>\n";
  html += "<section id=\"steps\">\n<h2>Per iteration</h2>\n" + steps_html(summary) + "</section>\n";
  html += "<footer>Generated by twin report from best.json, metrics.json, ops.csv and the measured trace. "
          "Predicted times are the simulator's; measured ones come from CUDA events (steps) and CUPTI "
          "(ops).</footer>\n</main>\n</body>\n</html>\n";
  return html;
}

void write_execution_report(const std::filesystem::path& path, const ExecutedRun& run) {
  write_file_atomically(path, execution_report_html(run, summarize_execution(run)));
}

}  // namespace twin
