// Only simulated numbers are printed: the plan's detail (phases, switch bytes) and the iteration times of
// the plan and of the fastest static-packed candidate of the same run.
#include "reports/hot_switch_section.hpp"

#include <fmt/format.h>

#include "reports/format.hpp"

namespace twin {
namespace {

bool is_hot_switch(const Candidate& c) { return c.feasible && c.plan && c.plan->family == "hot-switch"; }
std::size_t phase_count(const Candidate& c) { return c.plan->detail.at("phases").size(); }

std::string gigabytes(const nlohmann::json& bytes) { return fixed(bytes.get<double>() / 1e9, 2) + " GB"; }

}  // namespace

std::string hot_switch_section_html(const std::vector<Candidate>& ranked) {
  const Candidate* plan = nullptr;
  const Candidate* baseline = nullptr;
  std::size_t rank = 0;
  for (std::size_t k = 0; k < ranked.size(); ++k) {  // ranked is fastest first
    if (!is_hot_switch(ranked[k])) continue;
    if (phase_count(ranked[k]) > 1 && !plan) plan = &ranked[k], rank = k + 1;
    if (phase_count(ranked[k]) == 1 && !baseline) baseline = &ranked[k];
  }
  if (!plan) return {};

  std::string html = "<section id=\"hot-switch\">\n<h2>Hot switching: " +
                     escape_html(fmt::format("{} phases (rank {})", phase_count(*plan), rank)) + "</h2>\n";
  html += "<p>" + escape_html(
      "Sequences are bucketed by length and packed per bucket; each bucket runs its own strategy, shortest "
      "first, and the last (home) layout keeps the optimizer states and takes the one optimizer step. Between "
      "phases the bf16 weights (and, after the first phase, the accumulated gradients) are re-sharded GPU to "
      "GPU; each layer's compute waits only for its own weights.") + "</p>\n";
  html += "<table>\n<tr><th>phase</th><th>lengths</th><th>sequences</th><th>packs</th><th>strategy</th>"
          "<th>switch in (intra / inter node)</th><th>most received by one GPU</th></tr>\n";
  const nlohmann::json& phases = plan->plan->detail.at("phases");
  for (std::size_t p = 0; p < phases.size(); ++p) {
    const nlohmann::json& phase = phases[p];
    std::string moved = "–", most = "–";
    if (phase.contains("switch_in")) {
      const nlohmann::json& s = phase["switch_in"];
      moved = gigabytes(s["intra_node_bytes"]) + " / " + gigabytes(s["inter_node_bytes"]) +
              (s["gradients"].get<bool>() ? " (weights + gradients)" : " (weights)");
      most = gigabytes(s["max_received_bytes_per_gpu"]);
    }
    html += fmt::format("<tr><td>{}{}</td><td>({}, {}]</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                        "<td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>\n",
                        p + 1, p + 1 == phases.size() ? " (home)" : "",
                        phase["min_length_exclusive"].get<std::int64_t>(), phase["max_length"].get<std::int64_t>(),
                        phase["sequences"].get<std::int64_t>(), phase["padded_packs"].get<std::int64_t>(),
                        escape_html(phase["strategy"].get<std::string>()), escape_html(moved), most);
  }
  html += "</table>\n";
  std::string comparison = fmt::format("Iteration {} ms.", milliseconds_text(plan->result.iteration_ns));
  if (baseline) {
    const double ratio = static_cast<double>(baseline->result.iteration_ns) / static_cast<double>(plan->result.iteration_ns);
    comparison += fmt::format(
        " The best static strategy that fits the longest sequence, {}, with every sequence packed to it, takes {} ms: "
        "hot switching is {} ({}x).",
        baseline->strategy.key(), milliseconds_text(baseline->result.iteration_ns),
        ratio >= 1 ? fixed((ratio - 1) * 100, 1) + "% faster" : fixed((1 / ratio - 1) * 100, 1) + "% slower",
        fixed(ratio, 3));
  }
  html += "<p>" + escape_html(comparison) + "</p>\n</section>\n";
  return html;
}

}  // namespace twin
