// Builds the trace event by event in a fixed order (metadata, ops class by class, then flows), so that
// the same iteration always gives the same bytes; nlohmann::json sorts keys, which fixes key order too.
#include "traces/chrome_trace.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/json_text.hpp"
#include "traces/gzip_stream.hpp"

namespace twin {
namespace {

// Microseconds from integer ns: ns / 1000.0 is the double nearest to the 3-decimal value, and JSON's
// shortest round-trip printing writes it back as at most 3 decimals, so ts * 1000 recovers ns exactly.
// An event reaches the writer as its JSON text (one line).
using Emit = std::function<void(const std::string&)>;

double microseconds(TimeNs ns) { return static_cast<double>(ns) / 1000.0; }

std::string process_label(const RankClass& rank_class) {
  std::string label = rank_class.label.empty() ? fmt::format("class {}", rank_class.index) : rank_class.label;
  if (rank_class.num_ranks == 1) return fmt::format("{} (rank {})", label, rank_class.first_rank);
  return fmt::format("{} (rank {}, 1 of {} identical ranks)", label, rank_class.first_rank, rank_class.num_ranks);
}

// Labels come from user scenarios: replace invalid UTF-8 rather than fail at the end of a long run.
std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string metadata(const char* name, int pid, int tid, nlohmann::json args) {
  return dump({{"ph", "M"}, {"name", name}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}});
}

void add_metadata(const RankClass& rank_class, const Emit& events) {
  const int pid = rank_class.first_rank;
  events(metadata("process_name", pid, 0, {{"name", process_label(rank_class)}}));
  events(metadata("process_sort_index", pid, 0, {{"sort_index", rank_class.index}}));
  events(metadata("process_labels", pid, 0,
                            {{"labels", fmt::format("pipeline {} stage {}", rank_class.pipeline, rank_class.stage)}}));
  std::array<bool, kStreamCount> used{};
  for (OpIndex i = 0; i < rank_class.size(); ++i) used[static_cast<int>(rank_class.op(i).stream)] = true;
  for (int stream = 0; stream < kStreamCount; ++stream) {
    if (!used[stream]) continue;
    events(metadata("thread_name", pid, stream, {{"name", to_string(static_cast<Stream>(stream))}}));
    events(metadata("thread_sort_index", pid, stream, {{"sort_index", stream}}));
  }
}

// A number as nlohmann::json prints it (shortest round trip, ".0" on integral doubles; null when not finite):
// through the routine its dump() calls, without the json value and the output adapter dump() allocates for each
// (three numbers per op of every traced candidate).
void append_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  std::array<char, 64> digits;  // as nlohmann's serializer holds them
  char* end = nlohmann::detail::to_chars(digits.data(), digits.data() + digits.size(), value);
  out.append(digits.data(), static_cast<std::size_t>(end - digits.data()));
}

// One op's "X" event, written straight to text: the bytes dump() gives the object {"args": {bytes, chunk,
// flops, group, kind, layer, micro_batch, op_id, phase, [recomputed,] role, stage}, "cat", "dur", "name", "ph",
// "pid", "tid", "ts"} (keys sorted, as nlohmann::json orders them), without building it: a trace holds an
// event per op of every rank class, and building each as a JSON object was most of `twin simulate`'s time
// on the largest scenarios (docs/PERFORMANCE.md).
std::string op_event(const RankClass& rank_class, OpIndex index, const OpTiming& timing) {
  const Op& op = rank_class.op(index);
  const std::string kind = to_string(op.kind);
  std::string out;
  out.reserve(320);
  out += "{\"args\":{\"bytes\":";
  out += fmt::format_int(op.bytes).c_str();
  out += ",\"chunk\":";
  out += fmt::format_int(op.chunk).c_str();
  out += ",\"flops\":";
  append_number(out, op.flops);
  out += ",\"group\":";
  append_json_string(out, to_string(op.group));
  out += ",\"kind\":";
  append_json_string(out, kind);
  out += ",\"layer\":";
  out += fmt::format_int(op.layer).c_str();
  out += ",\"micro_batch\":";
  out += fmt::format_int(op.micro_batch).c_str();
  out += ",\"op_id\":";
  append_json_string(out, op_id(rank_class.index, index));
  out += ",\"phase\":";
  append_json_string(out, to_string(op.phase));
  if (op.recomputed) out += ",\"recomputed\":true";
  out += ",\"role\":";
  append_json_string(out, to_string(op.role));
  out += ",\"stage\":";
  out += fmt::format_int(rank_class.stage).c_str();
  out += "},\"cat\":";
  append_json_string(out, kind);
  out += ",\"dur\":";
  append_number(out, microseconds(timing.end_ns - timing.start_ns));
  out += ",\"name\":";
  append_json_string(out, op_name(op));
  out += ",\"ph\":\"X\",\"pid\":";
  out += fmt::format_int(rank_class.first_rank).c_str();
  out += ",\"tid\":";
  out += fmt::format_int(static_cast<int>(op.stream)).c_str();
  out += ",\"ts\":";
  append_number(out, microseconds(timing.start_ns));
  out += '}';
  return out;
}

// One arrow per pipeline transfer, from the start of the send to where the data lands in the receive.
void add_flows(const IterationGraph& graph, const IterationResult& result, const Emit& events) {
  std::map<std::pair<int, std::int64_t>, OpIndex> receives;  // (class, p2p_tag) -> recv op
  for (const RankClass& rank_class : graph.classes)
    for (OpIndex i = 0; i < rank_class.size(); ++i)
      if (rank_class.op(i).kind == OpKind::recv) receives.emplace(std::pair{rank_class.index, rank_class.op(i).p2p_tag}, i);

  std::int64_t flow_id = 0;
  for (const RankClass& sender : graph.classes) {
    for (OpIndex i = 0; i < sender.size(); ++i) {
      const Op& send = sender.op(i);
      if (send.kind != OpKind::send || send.peer < 0) continue;
      auto found = receives.find({send.peer, send.p2p_tag});
      if (found == receives.end()) continue;  // context-parallel ring sends have no recv op
      const RankClass& receiver = graph.classes.at(send.peer);
      const Op& recv = receiver.op(found->second);
      const OpTiming& send_time = result.classes[sender.index].op_timings[i];
      const OpTiming& recv_time = result.classes[receiver.index].op_timings[found->second];
      // "bp":"e" binds the arrow head to the slice enclosing its ts; a slice's end is exclusive, so the
      // head sits 1 ns before the receive completes (or at its start when it took no time).
      const TimeNs landing_ns = recv_time.end_ns > recv_time.start_ns ? recv_time.end_ns - 1 : recv_time.start_ns;
      const std::string name = to_string(send.role);
      ++flow_id;
      events(dump({{"ph", "s"}, {"id", flow_id}, {"name", name}, {"cat", "pp_p2p"},
                   {"pid", sender.first_rank}, {"tid", static_cast<int>(send.stream)},
                   {"ts", microseconds(send_time.start_ns)}}));
      events(dump({{"ph", "f"}, {"bp", "e"}, {"id", flow_id}, {"name", name}, {"cat", "pp_p2p"},
                   {"pid", receiver.first_rank}, {"tid", static_cast<int>(recv.stream)},
                   {"ts", microseconds(landing_ns)}}));
    }
  }
}

void check_timings(const IterationGraph& graph, const IterationResult& result) {
  if (result.classes.size() != graph.classes.size())
    throw std::invalid_argument("chrome_trace: the result has a different number of rank classes than the graph");
  for (const RankClass& rank_class : graph.classes)
    if (result.classes[rank_class.index].op_timings.size() != rank_class.size())
      throw std::invalid_argument(
          fmt::format("chrome_trace: no op timings for class {} (simulate with record_op_timings)", rank_class.index));
}

nlohmann::json other_data(const IterationGraph& graph, const IterationResult& result, const std::string& title) {
  return {{"source", "twin simulate"},
          {"strategy", title},
          {"iteration_ns", result.iteration_ns},
          {"critical_class", result.critical_class},
          {"ops", graph.total_ops()}};
}

// Every event in the trace's fixed order, one at a time: a trace of millions of ops is never held whole.
void for_each_event(const IterationGraph& graph, const IterationResult& result, const Emit& emit) {
  for (const RankClass& rank_class : graph.classes) add_metadata(rank_class, emit);
  for (const RankClass& rank_class : graph.classes) {
    const auto& timings = result.classes[rank_class.index].op_timings;
    for (OpIndex i = 0; i < rank_class.size(); ++i) emit(op_event(rank_class, i, timings[i]));
  }
  add_flows(graph, result, emit);
}

}  // namespace

nlohmann::json chrome_trace(const IterationGraph& graph, const IterationResult& result, const std::string& title) {
  check_timings(graph, result);
  nlohmann::json events = nlohmann::json::array();
  for_each_event(graph, result, [&](const std::string& event) { events.push_back(nlohmann::json::parse(event)); });
  return {{"displayTimeUnit", "ns"}, {"otherData", other_data(graph, result, title)}, {"traceEvents", std::move(events)}};
}

std::string chrome_trace_text(const nlohmann::json& trace) {
  std::string text = "{";
  bool first_key = true;
  for (const auto& [key, value] : trace.items()) {
    text += first_key ? "\n" : ",\n";
    first_key = false;
    text += dump(nlohmann::json(key)) + ":";
    if (key != "traceEvents") {
      text += dump(value);
      continue;
    }
    text += "[";
    for (std::size_t i = 0; i < value.size(); ++i) text += (i == 0 ? "\n" : ",\n") + dump(value[i]);
    text += "\n]";
  }
  text += "\n}\n";
  return text;
}

void write_chrome_trace(const std::filesystem::path& path, const IterationGraph& graph,
                        const IterationResult& result, const std::string& title) {
  check_timings(graph, result);
  // The layout of chrome_trace_text (keys in order, one event per line), written as the events come.
  const auto write_text = [&](std::ostream& out) {
    out << "{\n" << dump(nlohmann::json("displayTimeUnit")) << ":" << dump(nlohmann::json("ns")) << ",\n"
        << dump(nlohmann::json("otherData")) << ":" << dump(other_data(graph, result, title)) << ",\n"
        << dump(nlohmann::json("traceEvents")) << ":[";
    bool first = true;
    for_each_event(graph, result, [&](const std::string& event) {
      out << (first ? "\n" : ",\n") << event;
      first = false;
    });
    out << "\n]\n}\n";
  };
  write_file_atomically(path, [&](std::ostream& file) {
    if (path.extension() != ".gz") return write_text(file);
    GzipOstream compressed(file);
    write_text(compressed);
    compressed.finish();
  });
}

}  // namespace twin
