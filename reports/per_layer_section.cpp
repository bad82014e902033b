// Reads the plan the candidate holds (the one that was simulated), so the section shows exactly it. Only
// simulated figures are printed.
#include "reports/per_layer_section.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "strategies/per_layer/per_layer.hpp"

namespace twin {
namespace {

std::string layer_name(const LayerStrategy& layer) {
  return fmt::format("{} {} · ZeRO-{} · recompute {}", layer.layout.ulysses ? "Ulysses SP" : "TP", layer.layout.group,
                     layer.zero_stage, to_string(layer.recompute));
}

}  // namespace

std::string per_layer_section_html(const std::vector<const Candidate*>& top, const std::vector<Candidate>& ranked) {
  const Candidate* chosen = nullptr;
  const PerLayerPlan* plan = nullptr;
  std::size_t place = 0;
  for (std::size_t k = 0; k < top.size() && !chosen; ++k)
    if (const auto* found = top[k]->plan_as<PerLayerPlan>()) chosen = top[k], plan = found, place = k + 1;
  if (!chosen) return {};

  std::string html =
      "<section id=\"per-layer\">\n<h2>Per-layer hybrid: " +
      escape_html(fmt::format("{} (place {})", chosen->key(), place)) + "</h2>\n<p>" +
      escape_html(
          fmt::format("Each layer of a stage has its own layout (TP or Ulysses sequence parallel over a group, data "
                      "parallel over the rest of the stage), ZeRO stage and recompute, chosen by a dynamic programme "
                      "over layers and memory under the GPU's budget; stages are balanced by memory. A change of "
                      "layout between layers costs an all-to-all of the activations (and of their gradients). "
                      "{} samples per micro-batch and stage, {} micro-batches; iteration {}.",
                      plan->stage_micro_batch, plan->num_micro_batches, seconds_label(chosen->result.iteration_ns))) +
      "</p>\n<table>\n<tr><th>stage</th><th>layers</th><th>layer strategy</th></tr>\n";
  const std::vector<LayerStrategy>& layers = plan->layers;
  int first = 0;
  for (std::size_t stage = 0; stage < plan->stage_layers.size(); ++stage) {
    const int count = plan->stage_layers[stage];
    for (int i = first; i < first + count;) {
      int j = i;
      while (j < first + count && layers[j] == layers[i]) ++j;
      html += fmt::format("<tr><td>{}</td><td>{}–{}</td><td>{}</td></tr>\n", stage, i, j - 1,
                          escape_html(layer_name(layers[i])));
      i = j;
    }
    first += count;
  }
  html += "</table>\n";
  for (const Candidate& other : ranked)
    if (other.feasible && !other.plan) {
      html += "<p>" +
              escape_html(
                  fmt::format("Best uniform strategy simulated: {}, {}; the per-layer plan takes {:.1f}% less time.",
                              other.key(), seconds_label(other.result.iteration_ns),
                              100.0 * (1 - static_cast<double>(chosen->result.iteration_ns) /
                                               static_cast<double>(other.result.iteration_ns)))) +
              "</p>\n";
      break;
    }
  if (std::none_of(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.feasible && !c.plan; }))
    html += "<p>No uniform strategy of the search space fits in memory.</p>\n";
  return html + "</section>\n";
}

}  // namespace twin
