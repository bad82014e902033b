// The page holds the rows once, as data: drawing them is the script's (reports/report_script.js), so a report of
// thousands of candidates stays small and the table sorts and filters without a server.
#include "reports/ranking_table.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "reports/format.hpp"
#include "reports/ranking_csv.hpp"

namespace twin {
namespace {

// How the table shows a column of ranking.csv. `format` is the script's: "ms" (seconds shown as ms), "percent"
// (a fraction), "grouped" (thousands separated), "versus" (over the best), "flag" (true/false), "text" (as is).
struct ColumnView {
  const char* name;
  const char* label;
  const char* title;
  const char* format;
  bool first;    // shown before the strategy's fields: what a reader compares stays on screen
  bool tooltip;  // named in the trade-off chart's point tooltips
};

constexpr ColumnView kKnownColumns[] = {
    {"place", "place", "position in the ranking (simulated candidates, fastest first)", "text", true, true},
    {"strategy", "strategy", "the plan's key", "text", true, false},
    {"iteration_time_s", "iteration (ms)", "simulated time of one training step", "ms", true, true},
    {"vs_best", "vs best", "iteration time over the best's", "versus", true, false},
    {"tokens_per_s", "tokens/s", "tokens trained per second", "grouped", true, true},
    {"mfu", "MFU", "model FLOPs utilisation", "percent", true, true},
    {"hfu", "HFU", "hardware FLOPs utilisation (recomputed work counted)", "percent", true, false},
    {"peak_memory_GiB", "peak memory (GiB)", "peak memory per GPU, its busiest stage", "text", true, true},
    {"family", "family", "uniform, or the plan family beyond one uniform strategy", "text", false, false},
    {"tensor_model_parallel_size", "TP", "tensor_model_parallel_size", "text", false, false},
    {"pipeline_model_parallel_size", "PP", "pipeline_model_parallel_size", "text", false, false},
    {"context_parallel_size", "CP", "context_parallel_size", "text", false, false},
    {"expert_model_parallel_size", "EP", "expert_model_parallel_size", "text", false, false},
    {"data_parallel_size", "DP", "data_parallel_size", "text", false, false},
    {"virtual_pipeline_model_parallel_size", "VPP", "virtual_pipeline_model_parallel_size", "text", false, false},
    {"sequence_parallel", "SP", "sequence_parallel", "flag", false, false},
    {"micro_batch_size", "MBS", "micro_batch_size", "text", false, false},
    {"num_micro_batches", "micro-batches", "num_micro_batches", "text", false, false},
    {"zero_stage", "ZeRO", "zero_stage", "text", false, false},
    {"feasible", "simulated", "feasible and simulated", "flag", false, false},
    {"compute_s", "compute (ms)", "compute of the critical GPU ranks", "ms", false, false},
    {"exposed_communication_s", "exposed comm (ms)", "communication compute waited for", "ms", false, false},
    {"pipeline_bubble_s", "bubble (ms)", "waiting on other pipeline stages", "ms", false, false},
    {"optimizer_s", "optimizer (ms)", "the optimizer step, its collectives included", "ms", false, false},
    {"infeasible_reason", "why not", "why the candidate was not simulated", "text", false, true},
    {"plan", "plan", "a family plan in words", "text", false, false},
    {"replay", "replay", "replayed whole or extrapolated from its steady state", "text", false, false},
    {"executable", "twin execute", "whether twin execute runs the plan (its plan check), asked of the ten fastest", "text", false, false},
};

const ColumnView* known_column(const std::string& name) {
  for (const ColumnView& view : kKnownColumns)
    if (name == view.name) return &view;
  return nullptr;
}

bool is_number(const std::string& text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

// A column sorts by number when each of its non-empty fields is one.
bool numeric_column(const std::vector<std::vector<std::string>>& rows, std::size_t column) {
  bool any = false;
  for (const std::vector<std::string>& row : rows) {
    if (row[column].empty()) continue;
    if (!is_number(row[column])) return false;
    any = true;
  }
  return any;
}

nlohmann::json column_json(const std::string& name, std::size_t index, bool numeric) {
  const ColumnView* view = known_column(name);
  std::string css = name == "strategy" ? "key" : name == "infeasible_reason" ? "reason" : name == "plan" ? "plan" : "";
  if (css.empty() && numeric) css = "num";
  return {{"name", name},
          {"label", view ? view->label : name},
          {"title", view ? view->title : name},
          {"format", view ? view->format : "text"},
          {"numeric", numeric},
          {"css", css},
          {"tooltip", view && view->tooltip},
          {"index", index}};
}

// The columns in the order shown: the known first ones in their order, then every other in ranking.csv's.
nlohmann::json columns_json(const std::vector<std::string>& names, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> order;
  for (const ColumnView& view : kKnownColumns) {
    const auto at = std::find(names.begin(), names.end(), view.name);
    if (view.first && at != names.end()) order.push_back(static_cast<std::size_t>(at - names.begin()));
  }
  for (std::size_t c = 0; c < names.size(); ++c)
    if (std::find(order.begin(), order.end(), c) == order.end()) order.push_back(c);
  nlohmann::json columns = nlohmann::json::array();
  for (std::size_t c : order) columns.push_back(column_json(names[c], c, numeric_column(rows, c)));
  return columns;
}

// JSON inside <script> must not hold "</script" or "<!--": '<' occurs only inside strings, where \u003c means it.
std::string script_safe(const std::string& json) {
  std::string safe;
  safe.reserve(json.size());
  for (char c : json) {
    if (c == '<') safe += "\\u003c";
    else safe += c;
  }
  return safe;
}

std::string notes_html(const std::vector<Candidate>& candidates, const std::vector<std::size_t>& embedded) {
  std::vector<const Candidate*> feasible, other;
  for (const Candidate& candidate : candidates) (candidate.feasible ? feasible : other).push_back(&candidate);
  std::string html;
  const TimeNs best_ns = feasible.empty() ? 0 : feasible.front()->result.iteration_ns;
  const auto ties = std::count_if(feasible.begin() + std::min<std::size_t>(1, feasible.size()), feasible.end(),
                                  [&](const Candidate* c) {
                                    return static_cast<double>(c->result.iteration_ns) / best_ns - 1 <= kTieFraction;
                                  });
  if (ties > 0)
    html += fmt::format(
        "<p class=\"note\">{} candidate{} within {}% of the best (marked \"tie\"): that is the mean error of twin's "
        "predictions against published training runs (docs/VALIDATION.md), so the model does not tell them apart; "
        "choose among them by what else matters (memory headroom, simplicity) or measure.</p>\n",
        ties, ties == 1 ? " is" : "s are", fixed(100 * kTieFraction, 1));
  const auto pruned = std::count_if(other.begin(), other.end(), [](const Candidate* c) { return c->pruned; });
  if (embedded.size() < candidates.size()) {
    const auto feasible_embedded = static_cast<std::size_t>(
        std::count_if(embedded.begin(), embedded.end(), [&](std::size_t i) { return candidates[i].feasible; }));
    html += fmt::format("<p class=\"note\">The table holds {} of {} candidates: {} of the {} feasible ones (the "
                        "fastest) and {} of the {} infeasible{}; ranking.csv lists them all.</p>\n",
                        embedded.size(), candidates.size(), feasible_embedded, feasible.size(),
                        embedded.size() - feasible_embedded,
                        other.size(),
                        pruned > 0 ? fmt::format(" or not simulated ({} of them pruned by the search)", pruned) : "");
  }
  return html;
}

}  // namespace

std::vector<std::size_t> embedded_rows(const std::vector<Candidate>& candidates, std::size_t max_rows) {
  std::vector<std::size_t> feasible, other;
  for (std::size_t i = 0; i < candidates.size(); ++i) (candidates[i].feasible ? feasible : other).push_back(i);
  const std::size_t other_reserved = std::min(other.size(), kRankingTableInfeasibleRows);
  feasible.resize(std::min(feasible.size(), max_rows - std::min(max_rows, other_reserved)));
  other.resize(std::min(other.size(), max_rows - feasible.size()));
  feasible.insert(feasible.end(), other.begin(), other.end());
  return feasible;
}

std::string ranking_table_html(const Scenario& scenario, const std::vector<Candidate>& candidates,
                               std::size_t max_rows, const CostConfig* cost) {
  const std::vector<std::vector<std::string>> all_rows = ranking_rows(scenario, candidates, cost);
  std::vector<std::string> names = ranking_columns(cost);
  names.push_back("vs_best");
  const auto best = std::find_if(candidates.begin(), candidates.end(), [](const Candidate& c) { return c.feasible; });
  std::vector<std::vector<std::string>> rows;
  const std::vector<std::size_t> embedded = embedded_rows(candidates, max_rows);
  for (std::size_t i : embedded) {
    rows.push_back(all_rows[i]);
    const Candidate& c = candidates[i];
    rows.back().push_back(c.feasible && best->result.iteration_ns > 0
                              ? fixed(static_cast<double>(c.result.iteration_ns) / best->result.iteration_ns - 1, 6)
                              : std::string());
  }
  const nlohmann::json data = {{"columns", columns_json(names, rows)}, {"rows", rows}, {"tie_fraction", kTieFraction}};

  std::string html =
      "<div class=\"table-tools\"><label>Filter <input id=\"ranking-filter\" type=\"search\" size=\"48\" "
      "placeholder=\"1f1b tp=2 mfu>40 memory<60\" aria-describedby=\"ranking-help\"></label>"
      "<label><input id=\"ranking-simulated\" type=\"checkbox\"> simulated only</label>"
      "<span id=\"ranking-count\" class=\"note\"></span></div>\n"
      "<p id=\"ranking-help\" class=\"note\">Click a heading to sort by it (again to reverse). Each word of the filter "
      "must hold: a bare word is looked for in every cell; <code>column=value</code>, <code>&lt;</code>, "
      "<code>&gt;</code>, <code>&lt;=</code>, <code>&gt;=</code> and <code>!=</code> compare a column (its heading or "
      "ranking.csv name) by what it shows.</p>\n"
      "<div class=\"table-scroll\"><table id=\"ranking\"></table></div>\n"
      "<button id=\"ranking-more\" type=\"button\" hidden>show every matching row</button>\n"
      "<noscript><p class=\"note\">The table is drawn by the page's script; ranking.csv holds the same rows.</p>"
      "</noscript>\n";
  html += notes_html(candidates, embedded);
  html += "<script id=\"ranking-data\" type=\"application/json\">" +
          script_safe(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) + "</script>\n";
  return html;
}

}  // namespace twin
