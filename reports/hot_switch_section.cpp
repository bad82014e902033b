// Only simulated numbers are printed: the plan's phases and switch bytes and the iteration times of the plan
// and of the fastest static-packed candidate of the same run.
#include "reports/hot_switch_section.hpp"

#include <fmt/format.h>

#include "reports/format.hpp"
#include "strategies/hot_switch/hot_switch_plan.hpp"

namespace twin {
namespace {

bool is_hot_switch(const Candidate& c) { return c.feasible && c.plan_as<HotSwitchPlan>(); }
std::size_t phase_count(const Candidate& c) { return c.plan_as<HotSwitchPlan>()->phases.size(); }

}  // namespace

std::string hot_switch_section_html(const std::vector<Candidate>& ranked) {
  const Candidate* plan = nullptr;
  const Candidate* baseline = nullptr;
  std::size_t place = 0;
  for (std::size_t k = 0; k < ranked.size(); ++k) {  // ranked is fastest first
    if (!is_hot_switch(ranked[k])) continue;
    if (phase_count(ranked[k]) > 1 && !plan) plan = &ranked[k], place = k + 1;
    if (phase_count(ranked[k]) == 1 && !baseline) baseline = &ranked[k];
  }
  if (!plan) return {};

  std::string html = "<section id=\"hot-switch\">\n<h2>Hot switching: " +
                     escape_html(fmt::format("{} phases (place {})", phase_count(*plan), place)) + "</h2>\n";
  html += "<p>" + escape_html(
      "Sequences are bucketed by length and packed per bucket; each bucket runs its own strategy, shortest "
      "first, and the last (home) layout keeps the optimizer states and takes the one optimizer step. Between "
      "phases the bf16 weights (and, after the first phase, the accumulated gradients) are re-sharded GPU to "
      "GPU; each layer's compute waits only for its own weights.") + "</p>\n";
  html += "<table>\n<tr><th>phase</th><th>lengths</th><th>sequences</th><th>packs</th><th>strategy</th>"
          "<th>switch in (intra / inter node)</th><th>most received by one GPU</th></tr>\n";
  const HotSwitchPlan& hot = *plan->plan_as<HotSwitchPlan>();
  const std::vector<HotSwitchPhase>& phases = hot.phases;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    const PhaseWorkload& workload = phases[p].workload;
    std::string moved = "–", most = "–";
    if (p < hot.switches.size()) {  // into phase p; the first brings the weights only
      const SwitchPlan& s = hot.switches[p];
      moved = gigabytes_label(s.intra_node_bytes) + " / " + gigabytes_label(s.inter_node_bytes) +
              (p > 0 ? " (weights + gradients)" : " (weights)");
      most = gigabytes_label(s.max_received_bytes());
    }
    html += fmt::format("<tr><td>{}{}</td><td>({}, {}]</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                        "<td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>\n",
                        p + 1, p + 1 == phases.size() ? " (home)" : "", workload.min_exclusive, workload.max_length,
                        workload.sequences, phases[p].packs, escape_html(phases[p].strategy.key()), escape_html(moved),
                        most);
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
