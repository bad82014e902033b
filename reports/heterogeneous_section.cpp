// Renders the best asymmetric plan as a table of stages, with the uniform comparison in one sentence.
#include "reports/heterogeneous_section.hpp"

#include <fmt/format.h>

#include "reports/format.hpp"
#include "strategies/heterogeneous/asymmetric_plan.hpp"

namespace twin {

std::string heterogeneous_section_html(const std::vector<Candidate>& ranked) {
  const Candidate* best = nullptr;
  const AsymmetricPlan* plan = nullptr;
  const Candidate* uniform = nullptr;
  std::size_t place = 0;
  for (std::size_t k = 0; k < ranked.size(); ++k) {
    const Candidate& c = ranked[k];
    if (!c.feasible) continue;
    if (const auto* found = c.plan_as<AsymmetricPlan>(); found && !best) best = &c, plan = found, place = k + 1;
    if (!uniform && !c.plan) uniform = &c;
  }
  if (!best) return {};
  std::string html = "<section id=\"heterogeneous\">\n<h2>Heterogeneous plan: " +
                     escape_html(fmt::format("place {}", place)) + "</h2>\n";
  std::string text = fmt::format(
      "{} pipelines are data-parallel replicas, each with its own batch share and its own stages; each stage is "
      "one tensor-parallel group inside a node, priced on its own GPU kind, and faster GPUs hold more layers. "
      "Gradients are reduced across pipelines per segment of layers that one stage of each pipeline holds, by a "
      "ring over the pipelines. Iteration {} ms, {} tokens/s.",
      plan->pipelines.size(), milliseconds_text(best->result.iteration_ns), fixed(best->throughput.tokens_per_s, 0));
  if (uniform)
    text += fmt::format(" The best uniform plan ({}) takes {} ms: the asymmetric plan is {}x its throughput.",
                        uniform->key(), milliseconds_text(uniform->result.iteration_ns),
                        fixed(best->throughput.tokens_per_s / uniform->throughput.tokens_per_s, 2));
  html += "<p>" + escape_html(text) + "</p>\n<table>\n<tr><th>pipeline</th><th>sequences</th><th>stage</th>"
          "<th>GPU</th><th>devices</th><th>TP</th><th>layers</th><th>memory</th></tr>\n";
  std::size_t flat_stage = 0;
  for (std::size_t p = 0; p < plan->pipelines.size(); ++p) {
    const AsymmetricPipeline& pipeline = plan->pipelines[p];
    for (std::size_t s = 0; s < pipeline.stages.size(); ++s, ++flat_stage) {
      const AsymmetricStage& stage = pipeline.stages[s];
      const std::string memory = flat_stage < best->memory.per_stage.size()
                                     ? gib_text(best->memory.per_stage[flat_stage].total(), 1) : std::string();
      html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}–{}</td><td>{}</td><td>{}</td>"
                          "<td>{}</td></tr>\n",
                          p, s == 0 ? fmt::format("{} x {}", pipeline.micro_batch_size, pipeline.num_micro_batches) : "",
                          s, escape_html(plan->stage_gpus[p][s]), stage.devices.front(), stage.devices.back(),
                          stage.tensor_model_parallel_size, stage.num_layers, memory);
    }
  }
  html += "</table>\n</section>\n";
  return html;
}

}  // namespace twin
