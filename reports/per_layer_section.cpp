// Reads the plan from its detail JSON (what best.json carries), so the section shows exactly the plan
// that was simulated. Only simulated figures are printed.
#include "reports/per_layer_section.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/format.hpp"

namespace twin {
namespace {

std::string layer_name(const nlohmann::json& layer) {
  return fmt::format("{} {} · ZeRO-{} · recompute {}", layer["layout"] == "ulysses" ? "Ulysses SP" : "TP",
                     layer["group_size"].get<int>(), layer["zero_stage"].get<int>(),
                     layer["recompute"].get<std::string>());
}

std::string seconds(TimeNs ns) { return fixed(to_seconds(ns), 3) + " s"; }

}  // namespace

std::string per_layer_section_html(const std::vector<const Candidate*>& top, const std::vector<Candidate>& ranked) {
  const Candidate* chosen = nullptr;
  std::size_t rank = 0;
  for (std::size_t k = 0; k < top.size() && !chosen; ++k)
    if (top[k]->family() == "per-layer") chosen = top[k], rank = k + 1;
  if (!chosen) return {};
  const nlohmann::json& d = chosen->plan->detail;

  std::string html = "<section id=\"per-layer\">\n<h2>Per-layer hybrid: " +
                     escape_html(fmt::format("{} (rank {})", chosen->key(), rank)) + "</h2>\n<p>" +
                     escape_html(fmt::format(
                         "Each layer of a stage has its own layout (TP or Ulysses sequence parallel over a group, data "
                         "parallel over the rest of the stage), ZeRO stage and recompute, chosen by a dynamic programme "
                         "over layers and memory under the GPU's budget; stages are balanced by memory. A change of "
                         "layout between layers costs an all-to-all of the activations (and of their gradients). "
                         "{} samples per micro-batch and stage, {} micro-batches; iteration {}.",
                         d["stage_micro_batch_size"].get<int>(), d["num_micro_batches"].get<int>(),
                         seconds(chosen->result.iteration_ns))) +
                     "</p>\n<table>\n<tr><th>stage</th><th>layers</th><th>layer strategy</th></tr>\n";
  const nlohmann::json& layers = d["layers"];
  int first = 0;
  for (std::size_t stage = 0; stage < d["stage_num_layers"].size(); ++stage) {
    const int count = d["stage_num_layers"][stage].get<int>();
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
    if (other.feasible && other.family() == "uniform") {
      html += "<p>" + escape_html(fmt::format("Best uniform strategy simulated: {}, {}; the per-layer plan takes {:.1f}% less time.",
                                              other.key(), seconds(other.result.iteration_ns),
                                              100.0 * (1 - static_cast<double>(chosen->result.iteration_ns) /
                                                               static_cast<double>(other.result.iteration_ns)))) +
              "</p>\n";
      break;
    }
  if (std::none_of(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.feasible && c.family() == "uniform"; }))
    html += "<p>No uniform strategy of the search space fits in memory.</p>\n";
  return html + "</section>\n";
}

}  // namespace twin
