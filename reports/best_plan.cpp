// The plan stores the strategy, not the graph: the executor lowers it again with the same code, and the
// per-op list (compact arrays) is the cross-check that both sides see the same ops in the same order.
#include "reports/best_plan.hpp"

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "strategies/hot_switch/hot_switch_workload.hpp"

namespace twin {
namespace {

nlohmann::json breakdown_json(const TimeBreakdown& breakdown) {
  return {{"compute_ns", breakdown.compute_ns},
          {"exposed_communication_ns", breakdown.exposed_communication_ns},
          {"bubble_ns", breakdown.bubble_ns},
          {"optimizer_ns", breakdown.optimizer_ns}};
}

nlohmann::json memory_json(const MemoryBreakdown& memory) {
  return {{"parameters", memory.parameters},
          {"gradients", memory.gradients},
          {"optimizer_states", memory.optimizer_states},
          {"activations", memory.activations},
          {"communication_buffers", memory.communication_buffers},
          {"workspace", memory.workspace},
          {"outside_allocations", memory.outside_allocations},
          {"total", memory.total()}};
}

nlohmann::json predicted_json(const Candidate& best) {
  nlohmann::json peak_GiB = nlohmann::json::array();
  nlohmann::json memory_bytes = nlohmann::json::array();
  for (const MemoryBreakdown& stage : best.memory.per_stage) {
    peak_GiB.push_back(std::round(static_cast<double>(stage.total()) / kGiB * 1000.0) / 1000.0);
    memory_bytes.push_back(memory_json(stage));
  }
  return {{"iteration_ns", best.result.iteration_ns},
          // ns / 1e9 (one correctly rounded division) prints as the exact decimal; ns * 1e-9 may not.
          {"iteration_time_s", static_cast<double>(best.result.iteration_ns) / kNsPerS},
          {"tokens_per_s", best.throughput.tokens_per_s},
          {"mfu", best.throughput.mfu},
          {"hfu", best.throughput.hfu},
          {"critical_class", best.result.critical_class},
          {"breakdown", breakdown_json(best.result.breakdown)},
          {"peak_memory_GiB", std::move(peak_GiB)},
          {"memory_bytes_per_stage", std::move(memory_bytes)}};
}

// A class's ops, one row each (kPlanOpColumns); left empty for write_best_plan, which writes them as text.
nlohmann::json rank_class_json(const RankClass& rank_class, const ClassResult& timing, bool with_ops) {
  nlohmann::json ops = nlohmann::json::array();
  for (OpIndex i = 0; with_ops && i < rank_class.size(); ++i) {
    const Op& op = rank_class.op(i);
    const OpTiming& t = timing.op_timings[i];
    ops.push_back({op_id(rank_class.index, i), to_string(op.kind), to_string(op.role), op.layer, op.micro_batch,
                   to_string(op.stream), t.start_ns, t.end_ns - t.start_ns});
  }
  return {{"index", rank_class.index},         {"pipeline", rank_class.pipeline},
          {"stage", rank_class.stage},         {"num_ranks", rank_class.num_ranks},
          {"first_rank", rank_class.first_rank}, {"label", rank_class.label},
          {"finish_ns", timing.finish_ns},     {"op_count", rank_class.size()},
          {"ops", std::move(ops)}};
}

bool is_flat(const nlohmann::json& value) {
  for (const auto& element : value)
    if (element.is_structured()) return false;
  return true;
}

// A class's "ops" array at `depth`, as write_compact writes the rows rank_class_json builds (one per line), straight
// from the graph: building a json value per op and dumping it was most of writing best.json.
void write_op_rows(const RankClass& rank_class, const ClassResult& timing, int depth, std::string& out) {
  if (rank_class.size() == 0) {
    out += "[]";
    return;
  }
  const std::string indent(static_cast<std::size_t>(depth + 1), ' ');
  out += "[\n";
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    const Op& op = rank_class.op(i);
    const OpTiming& t = timing.op_timings[i];
    out += i == 0 ? "" : ",\n";
    out += indent;
    out += '[';
    append_json_string(out, op_id(rank_class.index, i));
    for (const std::string& name : {to_string(op.kind), to_string(op.role)}) {
      out += ',';
      append_json_string(out, name);
    }
    for (const std::int64_t number : {std::int64_t{op.layer}, std::int64_t{op.micro_batch}}) {
      out += ',';
      out += fmt::format_int(number).c_str();
    }
    out += ',';
    append_json_string(out, to_string(op.stream));
    for (const TimeNs number : {t.start_ns, t.end_ns - t.start_ns}) {
      out += ',';
      out += fmt::format_int(number).c_str();
    }
    out += ']';
  }
  out += "\n" + std::string(static_cast<std::size_t>(depth), ' ') + "]";
}

// The graph and timings whose op rows write_compact writes into the plan's rank classes.
struct OpRows {
  const IterationGraph& graph;
  const IterationResult& result;
};

// Indented like dump(1), except that arrays of scalars stay on one line: one op per line. With `rows` (given at the
// plan's top), each of the plan's rank classes gets its "ops" (left empty by rank_class_json) from them.
void write_compact(const nlohmann::json& value, int depth, std::string& out, const OpRows* rows = nullptr) {
  const auto dump = [](const nlohmann::json& v) { return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  const std::string indent(static_cast<std::size_t>(depth + 1), ' ');
  const std::string closing_indent(static_cast<std::size_t>(depth), ' ');
  if (!value.is_structured() || value.empty() || (value.is_array() && is_flat(value))) {
    out += dump(value);
    return;
  }
  out += value.is_object() ? "{\n" : "[\n";
  bool first = true;
  for (const auto& [key, element] : value.items()) {
    out += first ? "" : ",\n";
    first = false;
    out += indent;
    if (value.is_object()) out += dump(nlohmann::json(key)) + ": ";
    // rows reach the "rank_classes" array (depth 1), its class objects (depth 2) and their "ops".
    const bool in_classes = rows && (depth == 0 ? key == "rank_classes" : depth == 1);
    if (rows && depth == 2 && key == "ops") {
      const int c = value.at("index").get<int>();
      write_op_rows(rows->graph.classes.at(c), rows->result.classes.at(c), depth + 1, out);
    } else {
      write_compact(element, depth + 1, out, in_classes ? rows : nullptr);
    }
  }
  out += "\n" + closing_indent + (value.is_object() ? "}" : "]");
}


// The scenario as best.json holds it: a histogram of more bars than kMaxPlanHistogramBars as the batch it gives (its
// lengths with the sequences the batch holds of each, which give that batch again when read back), so that a
// histogram of millions of bars leaves best.json a file twin reads (at most 64 MiB) with the same plan.
constexpr std::size_t kMaxPlanHistogramBars = std::size_t{1} << 16;  // about 1 MB of best.json

Scenario as_planned(const Scenario& scenario) {
  if (scenario.training.seq_length_histogram.size() <= kMaxPlanHistogramBars) return scenario;
  Scenario planned = scenario;  // the histogram is shared, not copied
  planned.training.seq_length_histogram = batch_sequences(scenario);
  return planned;
}

// What names the plan (objects keep their keys sorted, so the order these are set in does not show in the file).
nlohmann::json plan_header(const Scenario& scenario, const Candidate& best) {
  nlohmann::json plan = {{"format", "twin-plan"},
                         {"version", kPlanFormatVersion},
                         {"lowering_version", kLoweringVersion},
                         {"scenario", to_json(as_planned(scenario))},
                         {"strategy", to_json(best.strategy)},
                         {"strategy_key", best.key()},
                         {"profile", scenario.profile}};
  // A family plan (hot switching, per-layer, heterogeneous) travels whole; `strategy` is its home strategy, or what
  // the family writes where its home is no strategy of the cluster (an asymmetric plan's strategy.pipelines).
  if (best.plan)
    if (std::optional<nlohmann::json> strategy = best.plan->plan_file_strategy()) plan["strategy"] = std::move(*strategy);
  if (best.plan) plan["family_plan"] = {{"family", best.plan->family()}, {"key", best.plan->key()},
                                        {"summary", best.plan->summary()}, {"detail", best.plan->to_json()}};
  return plan;
}

nlohmann::json plan_json(const Scenario& scenario, const Candidate& best, const IterationGraph& graph, bool with_ops) {
  if (best.result.classes.size() != graph.classes.size())
    throw std::invalid_argument("best_plan_json: the result has a different number of rank classes than the graph");
  nlohmann::json classes = nlohmann::json::array();
  for (const RankClass& rank_class : graph.classes) {
    const ClassResult& timing = best.result.classes[rank_class.index];
    if (timing.op_timings.size() != rank_class.size())
      throw std::invalid_argument(fmt::format(
          "best_plan_json: no op timings for class {} (simulate with record_op_timings)", rank_class.index));
    classes.push_back(rank_class_json(rank_class, timing, with_ops));
  }
  nlohmann::json columns = nlohmann::json::array();
  for (const char* column : kPlanOpColumns) columns.push_back(column);
  nlohmann::json plan = plan_header(scenario, best);
  plan["predicted"] = predicted_json(best);
  plan["op_columns"] = std::move(columns);
  plan["total_ops"] = graph.total_ops();
  plan["rank_classes"] = std::move(classes);
  return plan;
}

}  // namespace

nlohmann::json best_plan_json(const Scenario& scenario, const Candidate& best, const IterationGraph& graph) {
  return plan_json(scenario, best, graph, true);
}

Plan candidate_plan(const Scenario& scenario, const Candidate& candidate) {
  return parse_plan(plan_header(scenario, candidate), "the plan of " + candidate.key());
}

std::string best_plan_text(const nlohmann::json& plan) {
  std::string text;
  write_compact(plan, 0, text);
  return text + "\n";
}

void write_best_plan(const std::filesystem::path& path, const Scenario& scenario, const Candidate& best,
                     const IterationGraph& graph) {
  std::string text;
  const OpRows rows{graph, best.result};
  write_compact(plan_json(scenario, best, graph, false), 0, text, &rows);
  text += "\n";
  write_file_atomically(path, text);
}

}  // namespace twin
