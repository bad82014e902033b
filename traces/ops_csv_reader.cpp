// A small RFC 4180 reader (ops.csv quotes names with csv_field), then typed columns. Numbers are parsed
// with std::from_chars so that "12abc" or "1e3" are errors, not silently truncated values.
#include "traces/ops_csv_reader.hpp"

#include <charconv>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "traces/ops_csv.hpp"

namespace twin {
namespace {

struct Record {
  int line = 0;
  std::vector<std::string> fields;
};

std::vector<Record> split_records(std::string_view text, const std::string& source) {
  std::vector<Record> records;
  Record record{1, {}};
  std::string field;
  int line = 1;
  bool quoted = false, field_started = false;
  const auto end_record = [&] {
    record.fields.push_back(std::move(field));
    field.clear();
    records.push_back(std::move(record));
    record = Record{line, {}};
    field_started = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty()) {
      quoted = field_started = true;
    } else if (c == ',') {
      record.fields.push_back(std::move(field));
      field.clear();
      field_started = true;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      continue;  // the '\n' ends the record
    } else if (c == '\n') {
      ++line;
      end_record();
    } else {
      field += c;
      field_started = true;
    }
  }
  if (quoted) throw InputError(source, fmt::format("line {}", record.line), "a closing quote before the end of the file");
  if (field_started || !field.empty() || !record.fields.empty()) end_record();
  return records;
}

class RowReader {
 public:
  RowReader(const Record& record, const std::string& source) : record_(record), source_(source) {}

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
  const Record& record_;
  const std::string& source_;
};

std::size_t column_of(std::string_view name) {
  const std::vector<std::string>& columns = ops_csv_columns();
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return i;
  throw std::logic_error(fmt::format("ops.csv has no column '{}'", name));
}

}  // namespace

std::vector<OpsCsvRow> parse_ops_csv(std::string_view text, const std::string& source) {
  const std::vector<Record> records = split_records(text, source);
  const std::vector<std::string>& columns = ops_csv_columns();
  // Runs written before shared_gpu_iterations, the last column, existed: read with 0 there.
  const std::vector<std::string> older(columns.begin(), columns.end() - 1);
  if (records.empty() || (records.front().fields != columns && records.front().fields != older))
    throw InputError(source, "line 1",
                     fmt::format("the ops.csv header \"{}\" (written by twin execute)", fmt::join(columns, ",")));
  const std::size_t fields = records.front().fields.size();
  constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
  constexpr std::int64_t kMaxTime = std::numeric_limits<TimeNs>::max();
  std::vector<OpsCsvRow> rows;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const Record& record = records[r];
    if (record.fields.size() == 1 && record.fields[0].empty()) continue;  // a blank line
    if (record.fields.size() != fields)
      throw InputError(source, fmt::format("line {}", record.line),
                       fmt::format("{} fields (the header's columns), got {}", fields, record.fields.size()));
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
    if (fields == columns.size())
      row.shared_gpu_iterations = static_cast<int>(reader.integer(column_of("shared_gpu_iterations"), 0, kMaxInt));
    if (row.measured_median_ns.has_value() != row.measured_min_ns.has_value() ||
        row.measured_median_ns.has_value() != row.measured_max_ns.has_value())
      reader.fail(column_of("measured_min_ns"), "measured median, min and max all given or all empty");
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<OpsCsvRow> read_ops_csv(const std::filesystem::path& path) {
  return parse_ops_csv(read_input_file(path, "a readable ops.csv (written by twin execute)", kMaxRunFileBytes),
                       path.string());
}

std::vector<MeasuredRank> measured_ranks_from_rows(const std::vector<OpsCsvRow>& rows, const IterationGraph& graph,
                                                   const PlanPrediction& prediction, const std::string& source) {
  // Keyed by (rank, class): a rank runs one class per part of the step (hot switching's phases).
  std::map<std::pair<int, int>, MeasuredRank> by_rank;
  std::map<std::pair<int, int>, std::vector<bool>> seen;
  const auto fail = [&](const OpsCsvRow& row, const char* column, const std::string& expected) {
    throw InputError(source, fmt::format("line {}, column {}", row.line, column), expected);
  };
  for (const OpsCsvRow& row : rows) {
    if (static_cast<std::size_t>(row.rank_class) >= graph.classes.size())
      fail(row, "rank_class", fmt::format("a rank class of the plan (it has {})", graph.classes.size()));
    const RankClass& rank_class = graph.classes[static_cast<std::size_t>(row.rank_class)];
    const std::pair<int, int> key{row.rank, row.rank_class};
    auto [entry, added] = by_rank.try_emplace(key);
    MeasuredRank& rank = entry->second;
    if (added) {
      rank.rank = row.rank;
      rank.rank_class = row.rank_class;
      rank.ops.resize(rank_class.size());
      seen[key].assign(rank_class.size(), false);
    }
    if (row.op_index >= rank_class.size())
      fail(row, "op_id", fmt::format("an op index of class {} (it has {} ops)", rank_class.index, rank_class.size()));
    if (seen[key][row.op_index])
      fail(row, "op_id", fmt::format("each op once per rank and class (op {} of rank {}, class {}, is listed twice)",
                                     row.op_index, row.rank, row.rank_class));
    seen[key][row.op_index] = true;

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
    const PredictedOpTime& predicted = prediction.ops.at(rank_class.index).at(row.op_index);
    if (row.predicted_start_ns != predicted.start_ns || row.predicted_duration_ns != predicted.duration_ns)
      fail(row, "predicted_duration_ns",
           fmt::format("the plan's prediction for op c{}.{} (start {} ns, duration {} ns), got start {} ns, "
                       "duration {} ns: ops.csv and best.json are of different plans",
                       rank_class.index, row.op_index, predicted.start_ns, predicted.duration_ns,
                       row.predicted_start_ns, row.predicted_duration_ns));

    OpMeasurement& measured = rank.ops[row.op_index];
    measured.median_ns = row.measured_median_ns;
    measured.min_ns = row.measured_min_ns;
    measured.max_ns = row.measured_max_ns;
    measured.kernels = row.kernels;
    measured.shared_gpu_iterations = row.shared_gpu_iterations;
  }
  std::vector<MeasuredRank> ranks;
  for (auto& [key, measured] : by_rank) {
    const std::vector<bool>& listed = seen[key];
    for (OpIndex i = 0; i < listed.size(); ++i)
      if (!listed[i])
        throw InputError(source, "", fmt::format("a row for every op of rank {} (op {} of class {} is missing)",
                                                 key.first, i, measured.rank_class));
    ranks.push_back(std::move(measured));
  }
  if (ranks.empty()) throw InputError(source, "", "at least one op row after the header");
  return ranks;
}

}  // namespace twin
