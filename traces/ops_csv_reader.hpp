// Reads ops.csv (traces/ops_csv.hpp) back: one row per (rank, op) with its predicted and measured times,
// then joins the rows onto the plan's op graph as MeasuredRanks so that `twin report` reuses the same
// comparisons `twin execute` made. Every complaint names the file, the line and the column.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/op_graph.hpp"
#include "core/units.hpp"
#include "traces/measured_ops.hpp"
#include "traces/plan_prediction.hpp"

namespace twin {

struct OpsCsvRow {
  int line = 0;                       // 1-based line in the file (the header is line 1)
  OpIndex op_index = 0;               // the op_id column: the OpIndex within the rank class
  int rank = 0;
  int rank_class = 0;
  std::string name, kind, role, phase, stream;
  int layer = -1;
  int micro_batch = -1;
  TimeNs predicted_start_ns = 0;
  TimeNs predicted_duration_ns = 0;
  std::optional<TimeNs> measured_median_ns, measured_min_ns, measured_max_ns;  // empty for an absent op
  int kernels = 0;
  int shared_gpu_iterations = 0;  // 0 in files written before the column existed
};

// Calls `visit` with each row of the ops.csv at `path` in file order, reading the file in pieces: the reader
// holds one row whatever the file's size (at most kMaxRunFileBytes). RFC 4180 (quoted fields, CRLF or LF line
// ends); the header must be ops_csv_columns(). Throws InputError (the file, "line N, column C") for a file that
// cannot be read, a wrong header, a short or long row, or a value out of type.
void for_each_ops_csv_row(const std::filesystem::path& path, const std::function<void(const OpsCsvRow&)>& visit);
// The rows of `text`, read as for_each_ops_csv_row reads a file named `source`.
std::vector<OpsCsvRow> parse_ops_csv(std::string_view text, const std::string& source);

// One MeasuredRank per rank of the ops.csv at `path` (ascending), its ops filled from the rows' measured columns
// (iterations and spans are not in ops.csv: left empty), joined as the rows are read: memory is what the ranks
// keep. Each row must name the op of `graph` at its index (name, kind, role, phase, stream, layer, micro_batch)
// with the predicted times of `prediction`, and every rank must list every op of its class once; InputError
// naming the line otherwise.
std::vector<MeasuredRank> read_measured_ranks(const std::filesystem::path& ops_csv, const IterationGraph& graph,
                                              const PlanPrediction& prediction);

}  // namespace twin
