// Shares are of the candidate's own iteration so rows compare where the time goes, not only how much.
#include "reports/ranking_table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/format.hpp"

namespace twin {
namespace {

// What a reader compares comes first (time, throughput, MFU, memory), so it stays on screen however wide
// the strategy columns make the table.
constexpr const char* kHeader =
    "<thead><tr><th>#</th><th>strategy</th><th>iteration (ms)</th><th title=\"iteration time over the best's\">"
    "vs best</th><th>tokens/s</th><th>MFU</th><th>HFU</th><th>peak memory (GiB)</th>"
    "<th title=\"tensor_model_parallel_size\">TP</th>"
    "<th title=\"pipeline_model_parallel_size\">PP</th><th title=\"context_parallel_size\">CP</th>"
    "<th title=\"expert_model_parallel_size\">EP</th><th title=\"data_parallel_size\">DP</th>"
    "<th title=\"virtual_pipeline_model_parallel_size\">VPP</th><th title=\"sequence_parallel\">SP</th>"
    "<th title=\"micro_batch_size\">MBS</th><th title=\"num_micro_batches\">micro-batches</th>"
    "<th title=\"zero_stage\">ZeRO</th><th>recompute</th><th>schedule</th><th>bubble</th>"
    "<th>exposed comm</th>";

std::string cell(const std::string& text, const char* css_class = nullptr) {
  if (css_class) return fmt::format("<td class=\"{}\">{}</td>", css_class, escape_html(text));
  return "<td>" + escape_html(text) + "</td>";
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }

std::string share(TimeNs part, TimeNs total) {
  return total > 0 ? percent(static_cast<double>(part) / static_cast<double>(total)) : std::string();
}

// `best_ns`: the fastest candidate's iteration, for the "vs best" column and the tie mark.
std::string row_html(const Candidate& candidate, int rank, TimeNs best_ns, const RankingExtraColumns& extra) {
  const Strategy& s = candidate.strategy;
  const bool simulated = candidate.feasible;
  const TimeNs iteration_ns = candidate.result.iteration_ns;
  const double versus = simulated && best_ns > 0 ? static_cast<double>(iteration_ns) / best_ns - 1 : 0;
  const bool tie = simulated && rank > 1 && versus <= kTieFraction;
  const TimeBreakdown& b = candidate.result.breakdown;
  std::string row = !simulated ? "<tr class=\"infeasible\">" : tie ? "<tr class=\"feasible tie\">" : "<tr class=\"feasible\">";
  row += cell(rank > 0 ? std::to_string(rank) : "", "num");
  row += cell(candidate.key(), "key");
  row += cell(simulated ? milliseconds_text(iteration_ns) : "", "num");
  row += cell(!simulated ? "" : rank == 1 ? "best" : "+" + percent(versus) + (tie ? " (tie)" : ""), "num");
  row += cell(simulated ? grouped(candidate.throughput.tokens_per_s) : "", "num");
  row += cell(simulated ? percent(candidate.throughput.mfu) : "", "num");
  row += cell(simulated ? percent(candidate.throughput.hfu) : "", "num");
  row += cell(candidate.memory.per_stage.empty() ? "" : gib_text(candidate.memory.peak_bytes(), 1), "num");
  for (int value : {s.tensor_model_parallel_size, s.pipeline_model_parallel_size, s.context_parallel_size,
                    s.expert_model_parallel_size, s.data_parallel_size, s.virtual_pipeline_model_parallel_size})
    row += cell(std::to_string(value), "num");
  row += cell(s.sequence_parallel ? "yes" : "no");
  row += cell(std::to_string(s.micro_batch_size), "num");
  row += cell(std::to_string(s.num_micro_batches), "num");
  row += cell(std::to_string(s.zero_stage), "num");
  row += cell(to_string(s.recompute));
  row += cell(to_string(s.schedule));
  row += cell(simulated ? share(b.bubble_ns, b.total_ns()) : "", "num");
  row += cell(simulated ? share(b.exposed_communication_ns, b.total_ns()) : "", "num");
  if (extra.cells)
    for (const std::string& text : extra.cells(candidate)) row += cell(text, "num");
  row += cell(candidate.infeasible_reason, "reason");
  return row + "</tr>\n";
}

}  // namespace

std::string ranking_table_html(const std::vector<Candidate>& candidates, std::size_t max_rows,
                               const RankingExtraColumns& extra) {
  std::vector<const Candidate*> feasible, infeasible;
  for (const Candidate& candidate : candidates) (candidate.feasible ? feasible : infeasible).push_back(&candidate);
  const std::size_t infeasible_reserved = std::min(infeasible.size(), kRankingTableInfeasibleRows);
  const std::size_t feasible_shown = std::min(feasible.size(), max_rows - std::min(max_rows, infeasible_reserved));
  const std::size_t infeasible_shown = std::min(infeasible.size(), max_rows - feasible_shown);

  std::string header = kHeader;
  for (const std::string& name : extra.headers) header += "<th>" + escape_html(name) + "</th>";
  header += "<th>why not</th></tr></thead>\n";
  std::string html = "<div class=\"table-scroll\">\n<table id=\"ranking\">\n" + header + "<tbody>\n";
  const TimeNs best_ns = feasible.empty() ? 0 : feasible.front()->result.iteration_ns;
  for (std::size_t i = 0; i < feasible_shown; ++i) html += row_html(*feasible[i], static_cast<int>(i + 1), best_ns, extra);
  for (std::size_t i = 0; i < infeasible_shown; ++i) html += row_html(*infeasible[i], 0, best_ns, extra);
  html += "</tbody>\n</table>\n</div>\n";
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
  const auto pruned = std::count_if(infeasible.begin(), infeasible.end(), [](const Candidate* c) { return c->pruned; });
  std::string not_shown_kinds = "infeasible";
  if (pruned > 0)
    not_shown_kinds +=
        fmt::format(" or not simulated ({} feasible ones whose compute alone cannot reach the top)", pruned);
  if (feasible_shown + infeasible_shown < candidates.size())
    html += fmt::format(
        "<p class=\"note\">Showing {} of {} feasible and {} of {} {} candidates; ranking.csv lists them all.</p>\n",
        feasible_shown, feasible.size(), infeasible_shown, infeasible.size(), not_shown_kinds);
  return html;
}

}  // namespace twin
