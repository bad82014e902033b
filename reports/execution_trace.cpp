// The trace's complete events go back into MeasuredKernels and through join_measured_ops, so that the
// iteration spans here are computed exactly as `twin execute` computed them.
#include "reports/execution_trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_reader.hpp"
#include "traces/measured_ops.hpp"

namespace twin {
namespace {

// Chrome traces carry microseconds with nanosecond decimals.
TimeNs microseconds_to_ns(const JsonReader& value) {
  return static_cast<TimeNs>(std::llround(value.number(0, 9.2e15, "a time in microseconds, at least 0") * 1000.0));
}

// The trace's streams by id and the kernels of its ops, each checked against the rank class it names.
struct TraceKernels {
  std::map<std::uint32_t, std::string> stream_names;
  std::vector<MeasuredKernel> kernels;
};

MeasuredKernel op_kernel(const JsonReader& event, const JsonReader& op_field, const JsonReader& args,
                         const RankClass& rank_class) {
  MeasuredKernel kernel;
  kernel.op = static_cast<OpIndex>(op_field.integer(0, std::numeric_limits<std::uint32_t>::max() - 1));
  if (kernel.op >= rank_class.size())
    op_field.fail(fmt::format("an op index of class {} (it has {} ops)", rank_class.index, rank_class.size()));
  kernel.iteration = static_cast<std::int32_t>(args.required("iteration").integer(0, INT32_MAX));
  kernel.stream_id = static_cast<std::uint32_t>(event.required("tid").integer(0, UINT32_MAX));
  kernel.start_ns = microseconds_to_ns(event.required("ts"));
  kernel.end_ns = kernel.start_ns + microseconds_to_ns(event.required("dur"));
  return kernel;
}

TraceKernels read_trace_kernels(const JsonReader& root, const RankClass& rank_class) {
  TraceKernels out;
  for (const JsonReader& event : root.required("traceEvents").elements()) {
    event.expect_object();
    const std::string phase = event.required("ph").string();
    if (phase == "M") {
      if (event.required("name").string() == "thread_name")
        out.stream_names[static_cast<std::uint32_t>(event.required("tid").integer(0, UINT32_MAX))] =
            event.required("args").required("name").string();
      continue;
    }
    if (phase != "X") continue;
    const std::optional<JsonReader> args = event.find("args");
    if (!args) continue;
    const std::optional<JsonReader> op = args->find("op_index");
    if (!op) continue;  // a kernel outside any op: no iteration to place it in
    out.kernels.push_back(op_kernel(event, *op, *args, rank_class));
  }
  if (out.kernels.empty()) root.required("traceEvents").fail("complete (\"X\") events of ops (args.op_index)");
  return out;
}

// The median iteration's kernels, timed from its start, and the streams they ran on.
void keep_iteration(const TraceKernels& trace, const IterationSpan& median, MeasuredIteration& result) {
  std::map<std::uint32_t, bool> used;
  for (const MeasuredKernel& kernel : trace.kernels) {
    if (kernel.iteration != median.iteration) continue;
    result.kernels.push_back(
        {kernel.op, kernel.stream_id, kernel.start_ns - median.start_ns, kernel.end_ns - median.start_ns});
    used[kernel.stream_id] = true;
  }
  std::sort(result.kernels.begin(), result.kernels.end(), [](const IterationKernel& a, const IterationKernel& b) {
    return std::tie(a.start_ns, a.stream_id, a.end_ns, a.op) < std::tie(b.start_ns, b.stream_id, b.end_ns, b.op);
  });
  for (const auto& [stream, _] : used) {
    const auto name = trace.stream_names.find(stream);
    result.streams.push_back(
        {stream, name != trace.stream_names.end() ? name->second : fmt::format("stream {}", stream)});
  }
}

}  // namespace

MeasuredIteration median_measured_iteration(const nlohmann::json& trace, const IterationGraph& graph,
                                            const std::string& source) {
  const JsonReader root(trace, source);
  root.expect_object();
  const JsonReader other = root.required("otherData");
  MeasuredIteration result;
  result.rank = static_cast<int>(other.required("rank").integer(0, std::numeric_limits<int>::max()));
  const JsonReader class_field = other.required("rank_class");
  result.rank_class = static_cast<int>(class_field.integer(0, std::numeric_limits<int>::max()));
  if (static_cast<std::size_t>(result.rank_class) >= graph.classes.size())
    class_field.fail(fmt::format("a rank class of the plan (it has {})", graph.classes.size()));
  const RankClass& rank_class = graph.classes[static_cast<std::size_t>(result.rank_class)];
  const TraceKernels kernels = read_trace_kernels(root, rank_class);

  MeasuredRank joined;
  try {
    joined = join_measured_ops(rank_class, kernels.kernels, result.rank);
  } catch (const std::invalid_argument& error) {
    throw InputError(source, "/traceEvents", error.what());
  }
  std::vector<IterationSpan> spans = joined.iteration_spans;
  std::stable_sort(spans.begin(), spans.end(),
                   [](const IterationSpan& a, const IterationSpan& b) { return a.span_ns() < b.span_ns(); });
  const IterationSpan& median = spans[(spans.size() - 1) / 2];
  result.iteration = median.iteration;
  result.measured_iterations = static_cast<int>(spans.size());
  result.span_ns = median.span_ns();
  keep_iteration(kernels, median, result);
  return result;
}

MeasuredIteration read_median_measured_iteration(const std::filesystem::path& path, const IterationGraph& graph) {
  const nlohmann::json trace =
      read_json_file(path.string(), "a readable measured trace (written by twin execute)");
  return median_measured_iteration(trace, graph, path.string());
}

}  // namespace twin
