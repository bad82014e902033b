// One measured iteration of one rank, read back from the Chrome trace `twin execute` wrote
// (traces/measured_rank<r>.json, traces/measured_trace.hpp), for the report's measured timeline: the
// iteration of median span, its kernels shifted so that the iteration starts at 0.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "core/units.hpp"

namespace twin {

struct MeasuredStream {
  std::uint32_t stream_id = 0;
  std::string name;  // the trace's thread name ("compute (stream 27)")
};

struct IterationKernel {
  OpIndex op = 0;
  std::uint32_t stream_id = 0;
  TimeNs start_ns = 0;  // from the iteration's first kernel start
  TimeNs end_ns = 0;
};

struct MeasuredIteration {
  int rank = 0;
  int rank_class = 0;
  std::int32_t iteration = 0;          // the executor's iteration number (warm-up included)
  int measured_iterations = 0;         // iterations in the trace
  TimeNs span_ns = 0;                  // first kernel start to last kernel end
  std::vector<MeasuredStream> streams; // streams that ran a kernel of this iteration, by id
  std::vector<IterationKernel> kernels;  // by start, then stream, then end
};

// The iteration whose span is the median of the trace's iterations (the lower one of an even count;
// ties go to the earlier iteration). Kernels outside any op carry no iteration and are left out.
// Throws InputError (file `source`, JSON path) for a malformed trace or one whose ops are not those of
// its rank class in `graph`.
MeasuredIteration median_measured_iteration(const nlohmann::json& trace, const IterationGraph& graph,
                                            const std::string& source);
MeasuredIteration read_median_measured_iteration(const std::filesystem::path& path, const IterationGraph& graph);

}  // namespace twin
