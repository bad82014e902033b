// Reads best.json through JsonReader, so every complaint carries the file and the JSON Pointer of the
// offending value; the op rows are positional, so their column order is checked against kPlanOpColumns.
#include "traces/plan_prediction.hpp"

#include <cstddef>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "core/plan_file.hpp"

namespace twin {
namespace {

constexpr std::int64_t kMaxTime = std::numeric_limits<std::int64_t>::max();
constexpr std::size_t kColumnCount = std::size(kPlanOpColumns);

std::size_t column(std::string_view name) {
  for (std::size_t i = 0; i < kColumnCount; ++i)
    if (name == kPlanOpColumns[i]) return i;
  throw std::logic_error(fmt::format("no plan op column '{}'", name));
}

void check_columns(const JsonReader& plan) {
  const JsonReader columns = plan.required("op_columns");
  const std::vector<JsonReader> names = columns.elements();
  std::string expected = "[";
  for (std::size_t i = 0; i < kColumnCount; ++i) expected += fmt::format("{}\"{}\"", i ? ", " : "", kPlanOpColumns[i]);
  expected += "] (the op columns this twin reads)";
  if (names.size() != kColumnCount) columns.fail("expected " + expected);
  for (std::size_t i = 0; i < kColumnCount; ++i)
    if (!names[i].value().is_string() || names[i].value().get<std::string>() != kPlanOpColumns[i])
      names[i].fail(fmt::format("expected \"{}\" (the op columns this twin reads)", kPlanOpColumns[i]));
}

JsonReader class_entry(const JsonReader& plan, int rank_class) {
  const JsonReader classes = plan.required("rank_classes");
  const std::vector<JsonReader> entries = classes.elements();
  if (rank_class < 0 || static_cast<std::size_t>(rank_class) >= entries.size())
    classes.fail(fmt::format("expected an entry for rank class {}", rank_class));
  const JsonReader& entry = entries[static_cast<std::size_t>(rank_class)];
  entry.expect_object();
  if (entry.required("index").integer(0, std::numeric_limits<int>::max()) != rank_class)
    entry.required("index").fail(fmt::format("expected {} (classes are listed in index order)", rank_class));
  return entry;
}

std::vector<JsonReader> op_row(const JsonReader& row) {
  std::vector<JsonReader> fields = row.elements();
  if (fields.size() != kColumnCount) row.fail(fmt::format("expected an array of {} values (op_columns)", kColumnCount));
  return fields;
}

void expect_equal(const JsonReader& field, const nlohmann::json& expected, std::string_view what) {
  if (field.value() != expected)
    field.fail(fmt::format("expected {} (the op the executor lowered: {})", expected.dump(), what));
}

}  // namespace

std::vector<PredictedOpTime> predicted_op_times(const nlohmann::json& plan, int rank_class, const std::string& source) {
  const JsonReader root(plan, source);
  root.expect_object();
  check_columns(root);
  const JsonReader entry = class_entry(root, rank_class);
  std::vector<PredictedOpTime> times;
  OpIndex index = 0;
  for (const JsonReader& row : entry.required("ops").elements()) {
    const std::vector<JsonReader> fields = op_row(row);
    const JsonReader& id = fields[column("op_id")];
    if (!id.value().is_string() || id.value().get<std::string>() != op_id(rank_class, index))
      id.fail(fmt::format("expected \"{}\" (ops are listed in index order)", op_id(rank_class, index)));
    times.push_back({fields[column("predicted_start_ns")].integer(0, kMaxTime),
                     fields[column("predicted_duration_ns")].integer(0, kMaxTime)});
    ++index;
  }
  return times;
}

PlanPrediction read_plan_prediction(const nlohmann::json& plan, const IterationGraph& graph, const std::string& source) {
  const JsonReader root(plan, source);
  root.expect_object();
  PlanPrediction prediction;
  prediction.iteration_ns = root.required("predicted").required("iteration_ns").integer(0, kMaxTime);
  const JsonReader classes = root.required("rank_classes");
  if (classes.elements().size() != graph.classes.size())
    classes.fail(fmt::format("expected {} rank classes (the graph the executor lowered)", graph.classes.size()));

  for (const RankClass& rank_class : graph.classes) {
    prediction.ops.push_back(predicted_op_times(plan, rank_class.index, source));
    const JsonReader entry = class_entry(root, rank_class.index);
    prediction.class_finish_ns.push_back(entry.required("finish_ns").integer(0, kMaxTime));
    const std::vector<JsonReader> rows = entry.required("ops").elements();
    if (rows.size() != rank_class.size())
      entry.required("ops").fail(fmt::format("expected {} ops (the graph the executor lowered for class {})",
                                             rank_class.size(), rank_class.index));
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      const Op& op = rank_class.op(i);
      const std::vector<JsonReader> fields = op_row(rows[i]);
      const std::string name = op_name(op);
      expect_equal(fields[column("kind")], to_string(op.kind), name);
      expect_equal(fields[column("role")], to_string(op.role), name);
      expect_equal(fields[column("layer")], op.layer, name);
      expect_equal(fields[column("micro_batch")], op.micro_batch, name);
      expect_equal(fields[column("stream")], to_string(op.stream), name);
    }
  }
  return prediction;
}

}  // namespace twin
