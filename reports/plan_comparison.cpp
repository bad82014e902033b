// Bytes come from the ops the plan's graph holds, by their kind and communicator, never from names; the MoE routing
// is the model's, as the lowering priced it (core/moe_routing.hpp at the plan's EP and micro-batch).
#include "reports/plan_comparison.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "reports/format.hpp"
#include "reports/timeline_svg.hpp"

namespace twin {
namespace {

// What a GPU hands to its communicators: every collective's buffer and every message it sends (a receive is
// the same transfer as its send).
bool counts_bytes(const Op& op) { return op.is_communication() && op.kind != OpKind::recv; }

bool is_moe_all_to_all(const Op& op) {
  return op.kind == OpKind::all_to_all && (op.role == OpRole::dispatch || op.role == OpRole::combine);
}

std::string group_name(GroupKind group) {
  switch (group) {
    case GroupKind::none: return "re-sharding between layouts";
    case GroupKind::tensor: return "tensor (TP)";
    case GroupKind::context: return "context (CP)";
    case GroupKind::expert: return "expert (EP)";
    case GroupKind::data: return "data (DP)";
    case GroupKind::pipeline: return "pipeline (PP)";
    case GroupKind::expert_data: return "expert data";
    case GroupKind::embedding: return "embedding";
    case GroupKind::expert_tensor: return "expert tensor (ETP)";
    case GroupKind::amax: return "FP8 amax (TP x CP x DP)";
  }
  return "";
}

std::string share(TimeNs part, TimeNs total) {
  return milliseconds_text(part) + " (" + fixed(100.0 * part / std::max<TimeNs>(1, total), 1) + "%)";
}

// One row of the comparison: a heading and a cell per plan.
template <class Cell>
std::string row_html(const std::string& heading, const std::vector<ComparedPlan>& plans, Cell cell,
                     const char* css = "num") {
  std::string html = "<tr><th>" + escape_html(heading) + "</th>";
  for (const ComparedPlan& plan : plans) html += fmt::format("<td class=\"{}\">{}</td>", css, escape_html(cell(plan)));
  return html + "</tr>\n";
}

// The busiest EP rank of the plan's most skewed MoE layer, as the lowering draws it from the routing model.
ExpertParallelLoad busiest_layer_load(const Scenario& scenario, const Strategy& s) {
  const std::int64_t tokens = static_cast<std::int64_t>(s.micro_batch_size) * scenario.training.seq_length /
                              s.context_parallel_size /
                              (s.sequence_parallel ? s.tensor_model_parallel_size : 1);
  const int ep = s.expert_model_parallel_size;
  ExpertParallelLoad busiest{0, 0};
  for (const ExpertParallelLoad& load :
       layer_loads(scenario.model, ep, static_cast<double>(tokens) * scenario.model.moe.top_k * ep))
    if (load.rank_load > busiest.rank_load) busiest = load;
  return busiest;
}

std::string moe_rows(const Scenario& scenario, const std::vector<ComparedPlan>& plans) {
  std::string html = row_html("MoE: routing (model.moe.routing)", plans, [&](const ComparedPlan&) {
    return to_string(effective_routing(scenario.model.moe).distribution);
  });
  html += row_html("MoE: busiest expert's load over the mean (priced)", plans, [&](const ComparedPlan& p) {
    return fixed(busiest_layer_load(scenario, p.candidate.strategy).expert_load, 3);
  });
  html += row_html("MoE: busiest EP rank's routed tokens over the mean (priced)", plans, [&](const ComparedPlan& p) {
    return fixed(busiest_layer_load(scenario, p.candidate.strategy).rank_load, 3) + " at EP " +
           std::to_string(p.candidate.strategy.expert_model_parallel_size);
  });
  html += row_html("MoE: dispatch and combine all-to-all per GPU", plans, [](const ComparedPlan& p) {
    return p.moe_all_to_all_bytes > 0 ? gigabytes_label(p.moe_all_to_all_bytes) : std::string("none (EP 1)");
  });
  return html;
}

std::string comparison_table_html(const Scenario& scenario, const std::vector<ComparedPlan>& plans) {
  const TimeNs best_ns = plans.front().candidate.result.iteration_ns;
  std::string html = "<div class=\"table-scroll\"><table class=\"compare\">\n<tr><th></th>";
  for (const ComparedPlan& plan : plans) html += fmt::format("<th>place {}</th>", plan.place);
  html += "</tr>\n";
  html += row_html("strategy", plans, [](const ComparedPlan& p) { return p.candidate.key(); }, "key");
  html += row_html("iteration (ms)", plans, [&](const ComparedPlan& p) {
    const TimeNs ns = p.candidate.result.iteration_ns;
    return milliseconds_text(ns) + (p.place == 1 ? "" : " (+" + fixed(100.0 * (ns - best_ns) / best_ns, 1) + "%)");
  });
  html += row_html("tokens/s", plans, [](const ComparedPlan& p) { return grouped(p.candidate.throughput.tokens_per_s); });
  html += row_html("MFU", plans, [](const ComparedPlan& p) { return fixed(100 * p.candidate.throughput.mfu, 1) + "%"; });
  html += row_html("peak memory per GPU (GiB)", plans,
                   [](const ComparedPlan& p) { return gib_text(p.candidate.memory.peak_bytes(), 1); });
  const auto part = [&](const char* name, TimeNs TimeBreakdown::*member) {
    html += row_html(std::string(name) + " (ms)", plans, [&](const ComparedPlan& p) {
      const TimeBreakdown& b = p.candidate.result.breakdown;
      return share(b.*member, b.total_ns());
    });
  };
  part("compute", &TimeBreakdown::compute_ns);
  part("exposed communication", &TimeBreakdown::exposed_communication_ns);
  part("pipeline bubble", &TimeBreakdown::bubble_ns);
  part("optimizer", &TimeBreakdown::optimizer_ns);
  for (int g = 0; g < kGroupKindCount; ++g) {
    const bool any = std::any_of(plans.begin(), plans.end(), [&](const ComparedPlan& p) { return p.communication_bytes[g] > 0; });
    if (!any) continue;
    html += row_html("communication per GPU: " + group_name(static_cast<GroupKind>(g)), plans,
                     [&](const ComparedPlan& p) { return gigabytes_label(p.communication_bytes[g]); });
  }
  if (scenario.model.is_moe()) html += moe_rows(scenario, plans);
  return html + "</table></div>\n";
}

}  // namespace

ComparedPlan compare_plan(std::size_t place, const Candidate& detailed, const IterationGraph& graph,
                          TimeNs axis_end_ns) {
  ComparedPlan plan;
  plan.place = place;
  plan.candidate = detailed;
  for (ClassResult& c : plan.candidate.result.classes) c.op_timings = {};
  for (const RankClass& rank_class : graph.classes) {
    std::array<Bytes, kGroupKindCount> bytes{};
    Bytes all_to_all = 0;
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const Op& op = rank_class.op(i);
      if (!counts_bytes(op)) continue;
      bytes[static_cast<int>(op.group)] += op.bytes;
      if (is_moe_all_to_all(op)) all_to_all += op.bytes;
    }
    for (int g = 0; g < kGroupKindCount; ++g) plan.communication_bytes[g] = std::max(plan.communication_bytes[g], bytes[g]);
    plan.moe_all_to_all_bytes = std::max(plan.moe_all_to_all_bytes, all_to_all);
  }
  TimelineOptions options;
  options.axis_end_ns = axis_end_ns;
  options.only_class = detailed.result.critical_class;
  options.op_tooltips = false;  // the best's own timeline names them; three more would triple the report
  plan.timeline_svg = timeline_svg(graph, detailed.result, options);
  return plan;
}

std::string plan_comparison_section_html(const Scenario& scenario, const std::vector<ComparedPlan>& plans) {
  if (plans.empty()) return {};
  std::string html = fmt::format("<section id=\"compare\">\n<h2>The top {} plans side by side</h2>\n", plans.size());
  html += "<p class=\"note\">Communication is per GPU and iteration: each collective's buffer (nccl-tests' size) "
          "and each message a GPU sends, for the GPU ranks that move the most on that communicator.";
  if (plans.size() < 3) html += " <code>twin simulate --top 3</code> compares three.";
  html += "</p>\n" + comparison_table_html(scenario, plans);
  html += "<p class=\"note\">Their iterations on one time scale, each plan's critical GPU ranks (the class whose "
          "iteration ends last; the Chrome traces hold every class):</p>\n" + family_legend_html() + "\n";
  for (const ComparedPlan& plan : plans)
    html += fmt::format("<h3>place {}: <span class=\"key\">{}</span></h3>\n<div class=\"chart\">{}</div>\n", plan.place,
                        escape_html(plan.candidate.key()), plan.timeline_svg);
  return html + "</section>\n";
}

}  // namespace twin
