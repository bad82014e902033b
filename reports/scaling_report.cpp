// Fixed decimals, as ranking.csv: a sweep run twice writes the same bytes.
#include "reports/scaling_report.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/page_style.hpp"
#include "reports/ranking_csv.hpp"
#include "reports/svg.hpp"

namespace twin {
namespace {

double tokens_per_gpu(const ScalingRow& row) { return row.best ? row.best->throughput.tokens_per_s / row.gpus : 0; }

std::string optional_fixed(const std::optional<double>& value, int decimals) {
  return value ? fixed(*value, decimals) : std::string();
}

// "field=value ..." of one sweep point.
std::string point_label(const ScalingRow& row) {
  std::string label;
  for (const auto& [field, value] : row.values) label += (label.empty() ? "" : " ") + field + "=" + value;
  return label;
}

// One bar per point: tokens/s per GPU, the measure of how well the strategy scales. The label column is as wide as
// the longest label (about 7 px a character at 12 px), so that no label is cut.
std::string throughput_chart_svg(const std::vector<ScalingRow>& rows) {
  constexpr double kCharWidth = 7, kBarWidth = 520, kRowHeight = 22, kTop = 8;
  std::size_t longest = 0;
  for (const ScalingRow& row : rows) longest = std::max(longest, point_label(row).size());
  const double label_width = std::max(120.0, kCharWidth * static_cast<double>(longest) + 12);
  double best = 0;
  for (const ScalingRow& row : rows) best = std::max(best, tokens_per_gpu(row));
  Svg svg(label_width + kBarWidth + 90, kTop * 2 + kRowHeight * rows.size(), "tokens/s per GPU at each sweep point");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double y = kTop + kRowHeight * i;
    const std::string label = point_label(rows[i]);
    svg.text(label_width - 6, y + 15, label, "end", 12);
    const double value = tokens_per_gpu(rows[i]);
    if (best > 0 && value > 0) svg.rect(label_width, y + 3, kBarWidth * value / best, kRowHeight - 6, "#4c78a8", label);
    svg.text(label_width + (best > 0 ? kBarWidth * value / best : 0) + 6, y + 15,
             rows[i].best ? grouped(value) : "no feasible strategy", "start", 12);
  }
  return svg.str();
}

}  // namespace

std::string scaling_csv(const std::vector<std::string>& fields, const std::vector<ScalingRow>& rows,
                        const CostConfig* cost) {
  return csv_text(scaling_rows(fields, rows, cost));
}

std::vector<std::vector<std::string>> scaling_rows(const std::vector<std::string>& fields,
                                                   const std::vector<ScalingRow>& rows, const CostConfig* cost) {
  std::vector<std::string> header = fields;
  for (const char* name : {"gpus", "candidates", "feasible", "best_strategy", "iteration_time_s", "tokens_per_s",
                           "tokens_per_s_per_gpu", "mfu", "peak_memory_GiB"})
    header.emplace_back(name);
  if (cost)
    for (const std::string& name : training_cost_columns(*cost))
      if (name != "gpu_hours_per_step") header.push_back(name);
  header.insert(header.end(), {"folder", "note"});
  std::vector<std::vector<std::string>> table{header};
  for (const ScalingRow& row : rows) {
    std::vector<std::string> cells;
    for (const auto& [field, value] : row.values) cells.push_back(value);
    cells.insert(cells.end(), {std::to_string(row.gpus), std::to_string(row.candidates), std::to_string(row.feasible)});
    const Candidate* best = row.best ? &*row.best : nullptr;
    cells.push_back(best ? best->key() : "");
    cells.push_back(best ? seconds_text(best->result.iteration_ns) : "");
    cells.push_back(best ? fixed(best->throughput.tokens_per_s, 1) : "");
    cells.push_back(best ? fixed(tokens_per_gpu(row), 1) : "");
    cells.push_back(best ? fixed(best->throughput.mfu, 4) : "");
    cells.push_back(best ? gib_text(best->memory.peak_bytes(), 3) : "");
    if (cost) {
      const std::optional<TrainingCost>& c = row.cost;
      cells.push_back(c ? fixed(c->gpu_hours_per_million_tokens, 4) : "");
      cells.push_back(c ? fixed(c->cost_per_million_tokens, 4) : "");
      cells.push_back(c ? optional_fixed(c->time_to_train_hours, 2) : "");
      cells.push_back(c ? optional_fixed(c->cost_to_train, 2) : "");
    }
    cells.insert(cells.end(), {"points/" + row.folder, row.note});
    table.push_back(std::move(cells));
  }
  return table;
}

std::string scaling_html(const std::string& scenario_name, const std::vector<std::string>& fields,
                         const std::vector<ScalingRow>& rows, const CostConfig* cost) {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                     escape_html("twin sweep: " + scenario_name) + "</title>\n<style>" + kPageStyle +
                     "table { border-collapse: collapse; font-size: 13px; }\n"
                     "th, td { padding: 4px 8px; border-bottom: 1px solid #eaeef2; text-align: left; white-space: nowrap; }\n"
                     "td.num { text-align: right; font-variant-numeric: tabular-nums; }\n</style>\n</head>\n<body>\n<main>\n";
  html += "<h1>" + escape_html("Scaling: " + scenario_name) + "</h1>\n";
  html += "<h2>Throughput per GPU of the best strategy at each point</h2>\n<div class=\"chart\">" +
          throughput_chart_svg(rows) + "</div>\n<h2>Points</h2>\n<div class=\"chart\"><table>\n<thead><tr>";
  for (const std::string& field : fields) html += "<th>" + escape_html(field) + "</th>";
  html += "<th>GPUs</th><th>best strategy</th><th>iteration (ms)</th><th>tokens/s</th><th>tokens/s per GPU</th>"
          "<th>MFU</th><th>peak memory (GiB)</th>";
  if (cost) html += "<th>" + escape_html(cost->currency) + " / M tokens</th><th>days to train</th><th>" +
                    escape_html(cost->currency) + " to train</th>";
  html += "<th>report</th></tr></thead>\n<tbody>\n";
  for (const ScalingRow& row : rows) {
    const auto num = [](const std::string& text) { return "<td class=\"num\">" + escape_html(text) + "</td>"; };
    html += "<tr>";
    for (const auto& [field, value] : row.values) html += "<td>" + escape_html(value) + "</td>";
    html += num(std::to_string(row.gpus));
    const Candidate* best = row.best ? &*row.best : nullptr;
    html += "<td class=\"key\">" + escape_html(best ? best->key() : row.note) + "</td>";
    html += num(best ? milliseconds_text(best->result.iteration_ns) : "") +
            num(best ? grouped(best->throughput.tokens_per_s) : "") + num(best ? grouped(tokens_per_gpu(row)) : "") +
            num(best ? fixed(100 * best->throughput.mfu, 1) + "%" : "") +
            num(best ? gib_text(best->memory.peak_bytes(), 1) : "");
    if (cost) {
      const std::optional<TrainingCost>& c = row.cost;
      html += num(c ? fixed(c->cost_per_million_tokens, 3) : "") +
              num(c && c->time_to_train_hours ? fixed(*c->time_to_train_hours / 24, 1) : "") +
              num(c && c->cost_to_train ? grouped(*c->cost_to_train) : "");
    }
    // A point with nothing feasible is a failed run: no report, every candidate's reason in its infeasible.csv.
    html += row.best ? "<td><a href=\"points/" + escape_html(row.folder) + "/report.html\">report</a></td></tr>\n"
                     : "<td><a href=\"points/" + escape_html(row.folder) + "/infeasible.csv\">why</a></td></tr>\n";
  }
  html += "</tbody>\n</table></div>\n<footer>Generated by twin sweep. Times are simulated; each point's folder holds "
          "its ranking.csv, report.html and best.json.</footer>\n</main>\n</body>\n</html>\n";
  return html;
}

}  // namespace twin
