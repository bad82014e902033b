// Records one at a time (traces/csv_records.hpp: ops.csv quotes names with csv_field), then typed columns.
// Numbers are parsed with std::from_chars so that "12abc" or "1e3" are errors, not silently truncated values.
#include "traces/ops_csv_reader.hpp"

#include <charconv>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "traces/csv_records.hpp"
#include "traces/ops_csv.hpp"

namespace twin {
namespace {

class RowReader {
 public:
  RowReader(const CsvRecord& record, const std::string& source) : record_(record), source_(source) {}

  const std::string& text(std::size_t column) const { return record_.fields[column]; }

  std::int64_t integer(std::size_t column, std::int64_t min, std::int64_t max) const {
    const std::string& field = record_.fields[column];
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || error != std::errc() || end != field.data() + field.size() || value < min || value > max)
      fail(column, fmt::format("expected an integer in [{}, {}], got \"{}\"", min, max, field));
    return value;
  }
  std::optional<TimeNs> optional_ns(std::size_t column) const {
    if (record_.fields[column].empty()) return std::nullopt;
    return integer(column, 0, std::numeric_limits<TimeNs>::max());
  }
  [[noreturn]] void fail(std::size_t column, const std::string& expected) const {
    throw InputError(source_, fmt::format("line {}, column {}", record_.line, ops_csv_columns()[column]), expected);
  }

 private:
  const CsvRecord& record_;
  const std::string& source_;
};

std::size_t column_of(std::string_view name) {
  const std::vector<std::string>& columns = ops_csv_columns();
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::logic_error(fmt::format("ops.csv has no column '{}'", name));
}


// The header's field count (the columns of now or of files written before shared_gpu_iterations, the last,
// existed: read with 0 there).
std::size_t header_fields(const CsvRecord* header, const std::string& source) {
  const std::vector<std::string>& columns = ops_csv_columns();
  const std::vector<std::string> older(columns.begin(), columns.end() - 1);
  if (!header || (header->fields != columns && header->fields != older))
    throw InputError(source, "line 1",
                     fmt::format("the ops.csv header \"{}\" (written by twin execute)", fmt::join(columns, ",")));
  return header->fields.size();
}

OpsCsvRow typed_row(const CsvRecord& record, std::size_t fields, const std::string& source) {
  if (record.fields.size() != fields)
    throw InputError(source, fmt::format("line {}", record.line),
                     fmt::format("{} fields (the header's columns), got {}", fields, record.fields.size()));
  constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
  constexpr std::int64_t kMaxTime = std::numeric_limits<TimeNs>::max();
  const RowReader reader(record, source);
  OpsCsvRow row;
  row.line = record.line;
  row.op_index = static_cast<OpIndex>(reader.integer(column_of("op_id"), 0, kMaxInt));
  row.rank = static_cast<int>(reader.integer(column_of("rank"), 0, kMaxInt));
  row.rank_class = static_cast<int>(reader.integer(column_of("rank_class"), 0, kMaxInt));
  row.name = reader.text(column_of("name"));
  row.kind = reader.text(column_of("kind"));
  row.role = reader.text(column_of("role"));
  row.phase = reader.text(column_of("phase"));
  row.layer = static_cast<int>(reader.integer(column_of("layer"), -1, kMaxInt));
  row.micro_batch = static_cast<int>(reader.integer(column_of("micro_batch"), -1, kMaxInt));
  row.stream = reader.text(column_of("stream"));
  row.predicted_start_ns = reader.integer(column_of("predicted_start_ns"), 0, kMaxTime);
  row.predicted_duration_ns = reader.integer(column_of("predicted_duration_ns"), 0, kMaxTime);
  row.measured_median_ns = reader.optional_ns(column_of("measured_median_ns"));
  row.measured_min_ns = reader.optional_ns(column_of("measured_min_ns"));
  row.measured_max_ns = reader.optional_ns(column_of("measured_max_ns"));
  row.kernels = static_cast<int>(reader.integer(column_of("kernels"), 0, kMaxInt));
  if (fields == ops_csv_columns().size())
    row.shared_gpu_iterations = static_cast<int>(reader.integer(column_of("shared_gpu_iterations"), 0, kMaxInt));
  if (row.measured_median_ns.has_value() != row.measured_min_ns.has_value() ||
      row.measured_median_ns.has_value() != row.measured_max_ns.has_value())
    reader.fail(column_of("measured_min_ns"), "measured median, min and max all given or all empty");
  return row;
}

void for_each_row(std::istream& in, const std::string& source, std::uintmax_t max_bytes,
                  const std::function<void(const OpsCsvRow&)>& visit) {
  CsvRecordReader records(in, source, max_bytes);
  CsvRecord record;
  const std::size_t fields = header_fields(records.next(record) ? &record : nullptr, source);
  while (records.next(record)) {
    if (record.fields.size() == 1 && record.fields[0].empty()) continue;  // a blank line
    visit(typed_row(record, fields, source));
  }
}

}  // namespace

void for_each_ops_csv_row(const std::filesystem::path& path, const std::function<void(const OpsCsvRow&)>& visit) {
  std::ifstream in = open_input_file(path, "a readable ops.csv (written by twin execute)", kMaxRunFileBytes);
  for_each_row(in, path.string(), kMaxRunFileBytes, visit);
}

std::vector<OpsCsvRow> parse_ops_csv(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  std::vector<OpsCsvRow> rows;
  for_each_row(in, source, text.size(), [&](const OpsCsvRow& row) { rows.push_back(row); });
  return rows;
}

namespace {

// Joins rows onto the plan's graph as they come: one MeasuredRank per (rank, class) (a rank runs one class per
// part of the step, hot switching's phases) and one bit per op of it for the rows seen.
class RankJoin {
 public:
  RankJoin(const IterationGraph& graph, const PlanPrediction& prediction, const std::string& source)
      : graph_(graph), prediction_(prediction), source_(source) {}

  void add(const OpsCsvRow& row) {
    if (static_cast<std::size_t>(row.rank_class) >= graph_.classes.size())
      fail(row, "rank_class", fmt::format("a rank class of the plan (it has {})", graph_.classes.size()));
    const RankClass& rank_class = graph_.classes[static_cast<std::size_t>(row.rank_class)];
    const std::pair<int, int> key{row.rank, row.rank_class};
    auto [entry, added] = by_rank_.try_emplace(key);
    MeasuredRank& rank = entry->second;
    std::vector<bool>& seen = seen_[key];
    if (added) {
      rank.rank = row.rank;
      rank.rank_class = row.rank_class;
      rank.ops.resize(rank_class.size());
      seen.assign(rank_class.size(), false);
    }
    if (row.op_index >= rank_class.size())
      fail(row, "op_id", fmt::format("an op index of class {} (it has {} ops)", rank_class.index, rank_class.size()));
    if (seen[row.op_index])
      fail(row, "op_id", fmt::format("each op once per rank and class (op {} of rank {}, class {}, is listed twice)",
                                     row.op_index, row.rank, row.rank_class));
    seen[row.op_index] = true;
    check_identity(row, rank_class);
    OpMeasurement& measured = rank.ops[row.op_index];
    measured.median_ns = row.measured_median_ns;
    measured.min_ns = row.measured_min_ns;
    measured.max_ns = row.measured_max_ns;
    measured.kernels = row.kernels;
    measured.shared_gpu_iterations = row.shared_gpu_iterations;
  }

  std::vector<MeasuredRank> ranks() {
    std::vector<MeasuredRank> ranks;
    for (auto& [key, measured] : by_rank_) {
      const std::vector<bool>& listed = seen_[key];
      for (OpIndex i = 0; i < listed.size(); ++i)
        if (!listed[i])
          throw InputError(source_, "", fmt::format("a row for every op of rank {} (op {} of class {} is missing)",
                                                    key.first, i, measured.rank_class));
      ranks.push_back(std::move(measured));
    }
    if (ranks.empty()) throw InputError(source_, "", "at least one op row after the header");
    return ranks;
  }

 private:
  [[noreturn]] void fail(const OpsCsvRow& row, const char* column, const std::string& expected) const {
    throw InputError(source_, fmt::format("line {}, column {}", row.line, column), expected);
  }

  // The row names the op of the plan at its index, with the plan's predicted times.
  void check_identity(const OpsCsvRow& row, const RankClass& rank_class) const {
    const Op& op = rank_class.op(row.op_index);
    const auto expect = [&](const char* column, const std::string& actual, const std::string& expected) {
      if (actual != expected)
        fail(row, column, fmt::format("\"{}\" (op c{}.{} of the plan), got \"{}\"", expected, rank_class.index,
                                      row.op_index, actual));
    };
    expect("name", row.name, op_name(op));
    expect("kind", row.kind, to_string(op.kind));
    expect("role", row.role, to_string(op.role));
    expect("phase", row.phase, to_string(op.phase));
    expect("stream", row.stream, to_string(op.stream));
    expect("layer", std::to_string(row.layer), std::to_string(op.layer));
    expect("micro_batch", std::to_string(row.micro_batch), std::to_string(op.micro_batch));
    const PredictedOpTime& predicted = prediction_.ops.at(rank_class.index).at(row.op_index);
    if (row.predicted_start_ns != predicted.start_ns || row.predicted_duration_ns != predicted.duration_ns)
      fail(row, "predicted_duration_ns",
           fmt::format("the plan's prediction for op c{}.{} (start {} ns, duration {} ns), got start {} ns, "
                       "duration {} ns: ops.csv and best.json are of different plans",
                       rank_class.index, row.op_index, predicted.start_ns, predicted.duration_ns,
                       row.predicted_start_ns, row.predicted_duration_ns));
  }

  const IterationGraph& graph_;
  const PlanPrediction& prediction_;
  const std::string& source_;
  std::map<std::pair<int, int>, MeasuredRank> by_rank_;
  std::map<std::pair<int, int>, std::vector<bool>> seen_;
};

}  // namespace

std::vector<MeasuredRank> read_measured_ranks(const std::filesystem::path& ops_csv, const IterationGraph& graph,
                                              const PlanPrediction& prediction) {
  const std::string source = ops_csv.string();
  RankJoin join(graph, prediction, source);
  for_each_ops_csv_row(ops_csv, [&](const OpsCsvRow& row) { join.add(row); });
  return join.ranks();
}

}  // namespace twin
