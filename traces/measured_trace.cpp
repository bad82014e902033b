// Streams are found from the records (CUDA ids are the executor's), named from the op streams of the
// kernels they carried, and sorted by the first op stream they serve (compute first, as simulated).
#include "traces/measured_trace.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "traces/chrome_trace.hpp"

namespace twin {
namespace {

// Same conversion as the simulated trace: the double nearest ns / 1000 prints with at most 3 decimals.
double measured_microseconds(TimeNs ns) { return static_cast<double>(ns) / 1000.0; }

nlohmann::json measured_metadata(const char* name, int pid, std::int64_t tid, nlohmann::json args) {
  return {{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

struct CudaStream {
  std::array<bool, kStreamCount> serves{};  // op streams of the kernels it ran
  int first_served() const {
    const auto* found = std::find(serves.begin(), serves.end(), true);
    return static_cast<int>(found - serves.begin());  // kStreamCount when none
  }
  std::string label(std::uint32_t stream_id) const {
    std::string served;
    for (int s = 0; s < kStreamCount; ++s) {
      if (!serves[s]) continue;
      if (!served.empty()) served += '+';
      served += to_string(static_cast<Stream>(s));
    }
    return served.empty() ? fmt::format("stream {}", stream_id) : fmt::format("{} (stream {})", served, stream_id);
  }
};

void add_metadata(const RankClass& rank_class, int rank, const std::map<std::uint32_t, CudaStream>& streams,
                  nlohmann::json& events) {
  const std::string label = rank_class.label.empty() ? fmt::format("class {}", rank_class.index) : rank_class.label;
  events.push_back(measured_metadata("process_name", rank, 0, {{"name", fmt::format("{} (rank {})", label, rank)}}));
  events.push_back(measured_metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
  events.push_back(measured_metadata(
      "process_labels", rank, 0,
      {{"labels", fmt::format("pipeline {} stage {} (measured)", rank_class.pipeline, rank_class.stage)}}));
  std::vector<std::pair<int, std::uint32_t>> order;  // (first op stream served, CUDA stream id)
  for (const auto& [id, stream] : streams) order.emplace_back(stream.first_served(), id);
  std::sort(order.begin(), order.end());
  for (std::size_t position = 0; position < order.size(); ++position) {
    const std::uint32_t id = order[position].second;
    events.push_back(measured_metadata("thread_name", rank, id, {{"name", streams.at(id).label(id)}}));
    events.push_back(measured_metadata("thread_sort_index", rank, id, {{"sort_index", position}}));
  }
}

nlohmann::json kernel_event(const RankClass& rank_class, int rank, const MeasuredKernel& kernel, TimeNs origin_ns) {
  nlohmann::json event = {{"ph", "X"},
                          {"pid", rank},
                          {"tid", kernel.stream_id},
                          {"ts", measured_microseconds(kernel.start_ns - origin_ns)},
                          {"dur", measured_microseconds(kernel.end_ns - kernel.start_ns)}};
  if (!kernel.in_op()) {
    event["name"] = kernel.name;
    event["cat"] = "kernel";
    event["args"] = {{"kernel", kernel.name}};
    return event;
  }
  const Op& op = rank_class.op(kernel.op);
  event["name"] = op_name(op);
  event["cat"] = to_string(op.kind);
  event["args"] = {{"op_id", op_id(rank_class.index, kernel.op)},
                   {"op_index", kernel.op},
                   {"kernel", kernel.name},
                   {"iteration", kernel.iteration}};
  return event;
}

}  // namespace

nlohmann::json measured_chrome_trace(const RankClass& rank_class, int rank, const std::vector<MeasuredKernel>& kernels,
                                     const std::string& title, std::optional<TimeNs> origin_ns) {
  check_measured_kernels(rank_class, kernels, rank);
  std::vector<std::size_t> order(kernels.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const MeasuredKernel& x = kernels[a];
    const MeasuredKernel& y = kernels[b];
    return std::tie(x.start_ns, x.stream_id, x.end_ns) < std::tie(y.start_ns, y.stream_id, y.end_ns);
  });
  const TimeNs origin = origin_ns ? *origin_ns : (kernels.empty() ? 0 : kernels[order.front()].start_ns);

  std::map<std::uint32_t, CudaStream> streams;
  std::int64_t outside_ops = 0;
  for (const MeasuredKernel& kernel : kernels) {
    CudaStream& stream = streams[kernel.stream_id];
    if (kernel.in_op())
      stream.serves[static_cast<int>(rank_class.op(kernel.op).stream)] = true;
    else
      ++outside_ops;
  }

  nlohmann::json events = nlohmann::json::array();
  add_metadata(rank_class, rank, streams, events);
  for (std::size_t i : order) events.push_back(kernel_event(rank_class, rank, kernels[i], origin));
  return {{"displayTimeUnit", "ns"},
          {"otherData",
           {{"source", "twin execute (CUPTI)"},
            {"strategy", title},
            {"rank", rank},
            {"rank_class", rank_class.index},
            {"origin_ns", origin},
            {"kernels", kernels.size()},
            {"kernels_outside_ops", outside_ops}}},
          {"traceEvents", std::move(events)}};
}

void write_measured_chrome_trace(const std::filesystem::path& path, const RankClass& rank_class, int rank,
                                 const std::vector<MeasuredKernel>& kernels, const std::string& title,
                                 std::optional<TimeNs> origin_ns) {
  write_file_atomically(path, chrome_trace_text(measured_chrome_trace(rank_class, rank, kernels, title, origin_ns)));
}

}  // namespace twin
