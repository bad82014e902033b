// nlohmann's parser calls back at the end of every event object, which is read into twin's compact records and
// discarded from the document there: the document never holds more than one event. zlib's gzread reads plain and
// gzipped files alike, so one reader serves .json and .json.gz.
#include "traces/kineto_trace.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <streambuf>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "core/error.hpp"

namespace twin {
namespace {

using nlohmann::json;

// The uncompressed bytes of a file, plain or gzipped, stopping (end of input) past the limit.
class GzipBuffer : public std::streambuf {
 public:
  explicit GzipBuffer(gzFile file) : file_(file) {}
  bool over_limit() const { return over_limit_; }
  bool failed() const { return failed_; }

 protected:
  int_type underflow() override {
    if (over_limit_ || failed_) return traits_type::eof();
    const int n = gzread(file_, buffer_.data(), static_cast<unsigned>(buffer_.size()));
    int status = Z_OK;
    gzerror(file_, &status);
    if (n < 0 || (status != Z_OK && status != Z_STREAM_END)) failed_ = true;  // a truncated gzip ends in Z_BUF_ERROR
    if (n <= 0 || failed_) return traits_type::eof();
    read_ += static_cast<std::uint64_t>(n);
    if (read_ > kMaxKinetoTraceBytes) {
      over_limit_ = true;
      return traits_type::eof();
    }
    setg(buffer_.data(), buffer_.data(), buffer_.data() + n);
    return traits_type::to_int_type(buffer_[0]);
  }

 private:
  gzFile file_;
  std::array<char, 1 << 16> buffer_{};
  std::uint64_t read_ = 0;
  bool over_limit_ = false, failed_ = false;
};

struct GzipCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

class EventReader {
 public:
  explicit EventReader(KinetoTrace& trace) : trace_(trace) {}

  void read(const json& event) {
    if (++events_ > kMaxKinetoEvents)
      throw InputError(trace_.file, "/traceEvents", fmt::format("at most {} events", kMaxKinetoEvents));
    path_ = fmt::format("/traceEvents/{}", events_ - 1);
    if (!event.is_object()) fail("", "an event object");
    const auto ph = event.find("ph");
    if (ph == event.end() || *ph != "X") return;  // only complete events carry durations
    const std::string cat = string_of(event, "cat", /*required=*/false);
    if (cat == "cpu_op" || cat == "user_annotation") read_cpu_op(event, cat == "user_annotation");
    else if (cat == "kernel") read_gpu(event, KinetoGpuKind::kernel);
    else if (cat == "gpu_memcpy") read_gpu(event, KinetoGpuKind::memcpy);
    else if (cat == "gpu_memset") read_gpu(event, KinetoGpuKind::memset);
    else if (cat == "cuda_runtime" || cat == "cuda_driver") read_runtime(event);
  }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& expected) const {
    throw InputError(trace_.file, path_ + where, expected);
  }
  std::string string_of(const json& object, const char* key, bool required = true) const {
    const auto found = object.find(key);
    if (found == object.end()) {
      if (required) fail(fmt::format("/{}", key), "a string");
      return {};
    }
    if (!found->is_string()) fail(fmt::format("/{}", key), fmt::format("a string, got {}", found->type_name()));
    return found->get<std::string>();
  }
  // Microseconds with nanosecond decimals, as Kineto writes them, to integer nanoseconds.
  std::int64_t time_ns(const json& object, const char* key) const {
    const auto found = object.find(key);
    if (found == object.end()) fail(fmt::format("/{}", key), "a number (microseconds), got nothing");
    if (!found->is_number())
      fail(fmt::format("/{}", key), fmt::format("a number (microseconds), got {}", found->type_name()));
    const double us = found->get<double>();
    if (!(std::abs(us) < 1e13)) fail(fmt::format("/{}", key), "microseconds below 1e13");
    return std::llround(us * 1e3);
  }
  std::int64_t integer_arg(const json& args, const char* key, std::int64_t absent = -1) const {
    const auto found = args.find(key);
    if (found == args.end()) return absent;
    if (!found->is_number_integer()) fail(fmt::format("/args/{}", key), "an integer");
    return found->get<std::int64_t>();
  }
  std::int32_t intern(const std::string& name) {
    auto [at, added] = ids_.try_emplace(name, static_cast<std::int32_t>(trace_.names.size()));
    if (added) trace_.names.push_back(name);
    return at->second;
  }
  const json& args_of(const json& event) const {
    static const json none = json::object();
    const auto found = event.find("args");
    if (found == event.end()) return none;
    if (!found->is_object()) fail("/args", "an object");
    return *found;
  }

  void read_cpu_op(const json& event, bool annotation) {
    const std::string name = string_of(event, "name");
    if (annotation && name.starts_with("ProfilerStep#")) {
      trace_.steps.push_back({time_ns(event, "ts"), time_ns(event, "dur")});
      return;
    }
    KinetoCpuOp op;
    op.name = intern(name);
    op.ts_ns = time_ns(event, "ts");
    op.dur_ns = time_ns(event, "dur");
    op.annotation = annotation;
    if (const auto tid = event.find("tid"); tid != event.end() && tid->is_number_integer()) op.tid = tid->get<std::int64_t>();
    const json& args = args_of(event);
    op.external_id = integer_arg(args, "External id");
    if (const auto dims = args.find("Input Dims"); dims != args.end()) read_dims(*dims, op);
    if (const auto types = args.find("Input type"); types != args.end() && types->is_array() && !types->empty() &&
                                                     types->front().is_string())
      op.first_type = intern(types->front().get<std::string>());
    if (args.contains("Collective name")) {
      op.comms.collective = intern(string_of(args, "Collective name"));
      op.comms.in_elements = integer_arg(args, "In msg nelems", 0);
      op.comms.out_elements = integer_arg(args, "Out msg nelems", 0);
      op.comms.group_size = static_cast<std::int32_t>(std::clamp<std::int64_t>(integer_arg(args, "Group size", 0), 0, 1 << 24));
      if (args.contains("dtype")) op.comms.dtype = intern(string_of(args, "dtype"));
    }
    trace_.ops.push_back(std::move(op));
  }
  void read_dims(const json& dims, KinetoCpuOp& op) const {
    if (!dims.is_array() || dims.size() > 4096) fail("/args/Input Dims", "an array of shapes (at most 4096)");
    for (const json& shape : dims) {
      std::vector<std::int64_t> sizes;
      if (!shape.is_array() || shape.size() > 64) fail("/args/Input Dims", "shapes as arrays of at most 64 sizes");
      for (const json& size : shape) {
        if (!size.is_number_integer()) continue;  // a tensor list's entries are lists: no one shape
        sizes.push_back(size.get<std::int64_t>());
      }
      op.dims.push_back(std::move(sizes));
    }
  }
  void read_gpu(const json& event, KinetoGpuKind kind) {
    KinetoGpuEvent gpu;
    gpu.kind = kind;
    gpu.name = intern(string_of(event, "name"));
    gpu.ts_ns = time_ns(event, "ts");
    gpu.dur_ns = time_ns(event, "dur");
    if (gpu.dur_ns < 0) fail("/dur", "a duration >= 0");
    const json& args = args_of(event);
    gpu.stream = integer_arg(args, "stream", 0);
    gpu.external_id = integer_arg(args, "External id");
    gpu.correlation = integer_arg(args, "correlation");
    gpu.bytes = std::max<std::int64_t>(0, integer_arg(args, "bytes", 0));
    trace_.gpu.push_back(gpu);
  }
  void read_runtime(const json& event) {
    const json& args = args_of(event);
    const std::int64_t correlation = integer_arg(args, "correlation");
    const std::int64_t external = integer_arg(args, "External id");
    if (correlation >= 0 && external >= 0) trace_.external_by_correlation.emplace_back(correlation, external);
  }

  KinetoTrace& trace_;
  std::unordered_map<std::string, std::int32_t> ids_;
  std::size_t events_ = 0;
  std::string path_;
};

void read_header(const std::string& key, const json& value, KinetoTrace& trace) {
  if (key == "distributedInfo" && value.is_object()) {
    if (const auto rank = value.find("rank"); rank != value.end() && rank->is_number_integer())
      trace.rank = static_cast<int>(std::clamp<std::int64_t>(rank->get<std::int64_t>(), 0, 1 << 24));
    if (const auto world = value.find("world_size"); world != value.end() && world->is_number_integer())
      trace.world_size = static_cast<int>(std::clamp<std::int64_t>(world->get<std::int64_t>(), 1, 1 << 24));
  }
  if (key == "deviceProperties" && value.is_array() && !value.empty() && value.front().is_object())
    if (const auto name = value.front().find("name"); name != value.front().end() && name->is_string())
      trace.device_name = name->get<std::string>();
}

// Each op's enclosing op on its thread: ops sorted by (thread, start, longest first) nest as a stack.
void link_parents(KinetoTrace& trace) {
  std::sort(trace.ops.begin(), trace.ops.end(), [](const KinetoCpuOp& a, const KinetoCpuOp& b) {
    return std::tie(a.tid, a.ts_ns, b.dur_ns, a.external_id) < std::tie(b.tid, b.ts_ns, a.dur_ns, b.external_id);
  });
  std::vector<std::int32_t> stack;
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    KinetoCpuOp& op = trace.ops[i];
    while (!stack.empty()) {
      const KinetoCpuOp& top = trace.ops[static_cast<std::size_t>(stack.back())];
      if (top.tid == op.tid && op.ts_ns < top.ts_ns + top.dur_ns) break;
      stack.pop_back();
    }
    op.parent = stack.empty() ? -1 : stack.back();
    stack.push_back(static_cast<std::int32_t>(i));
  }
}

void index_trace(KinetoTrace& trace) {
  link_parents(trace);
  for (std::size_t i = 0; i < trace.ops.size(); ++i)
    if (trace.ops[i].external_id >= 0) trace.op_by_external_id.emplace_back(trace.ops[i].external_id, static_cast<std::int32_t>(i));
  // Several ops can share an External id (an annotation and the op it wraps): the innermost, the latest start, wins.
  std::stable_sort(trace.op_by_external_id.begin(), trace.op_by_external_id.end(), [&](const auto& a, const auto& b) {
    return std::tie(a.first, trace.ops[static_cast<std::size_t>(b.second)].ts_ns) <
           std::tie(b.first, trace.ops[static_cast<std::size_t>(a.second)].ts_ns);
  });
  std::sort(trace.external_by_correlation.begin(), trace.external_by_correlation.end());
  std::sort(trace.gpu.begin(), trace.gpu.end(), [](const KinetoGpuEvent& a, const KinetoGpuEvent& b) {
    return std::tie(a.ts_ns, a.stream, a.correlation) < std::tie(b.ts_ns, b.stream, b.correlation);
  });
  std::sort(trace.steps.begin(), trace.steps.end(), [](const KinetoStep& a, const KinetoStep& b) { return a.ts_ns < b.ts_ns; });
}

}  // namespace

std::int32_t KinetoTrace::launching_op(const KinetoGpuEvent& event) const {
  std::int64_t external = event.external_id;
  if (external < 0 && event.correlation >= 0) {
    const auto at = std::lower_bound(external_by_correlation.begin(), external_by_correlation.end(),
                                     std::pair{event.correlation, std::int64_t{-1}});
    if (at != external_by_correlation.end() && at->first == event.correlation) external = at->second;
  }
  if (external < 0) return -1;
  const auto at = std::lower_bound(op_by_external_id.begin(), op_by_external_id.end(), external,
                                   [](const auto& entry, std::int64_t id) { return entry.first < id; });
  return at != op_by_external_id.end() && at->first == external ? at->second : -1;
}

KinetoTrace read_kineto_trace(const std::filesystem::path& file) {
  KinetoTrace trace;
  trace.file = file.string();
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error))
    throw InputError(trace.file, "", std::filesystem::exists(file, error)
                                         ? "a PyTorch profiler trace as a regular file, got something else"
                                         : "a PyTorch profiler trace (.json or .json.gz): no such file");
  const std::unique_ptr<gzFile_s, GzipCloser> gz(gzopen(trace.file.c_str(), "rb"));
  if (!gz) throw InputError(trace.file, "", "a readable PyTorch profiler trace: cannot open the file");
  GzipBuffer buffer(gz.get());
  std::istream stream(&buffer);
  EventReader reader(trace);
  std::string top_key;
  bool saw_events = false;
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > 64) throw InputError(trace.file, "", "JSON nested at most 64 deep");
    if (event == json::parse_event_t::key && depth == 1) top_key = parsed.get<std::string>();
    if (top_key == "traceEvents" && depth == 1 && event == json::parse_event_t::array_start) saw_events = true;
    if (top_key == "traceEvents" && depth == 2 && event == json::parse_event_t::object_end) {
      reader.read(parsed);
      return false;  // read: keep nothing of it in the document
    }
    if (depth == 1 && event == json::parse_event_t::value) read_header(top_key, parsed, trace);
    if (depth == 1 && (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end) &&
        top_key != "traceEvents")
      read_header(top_key, parsed, trace);
    return true;
  };
  try {
    const json document = json::parse(stream, callback);
    if (!document.is_object()) throw InputError(trace.file, "", "a Chrome trace object {\"traceEvents\": [...]}");
  } catch (const json::parse_error& e) {
    if (buffer.over_limit())
      throw InputError(trace.file, "", fmt::format("at most {} bytes uncompressed", kMaxKinetoTraceBytes));
    if (buffer.failed()) throw InputError(trace.file, "", "a readable gzip stream (zlib failed: corrupt or truncated)");
    const std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 1, ...": the part after "] "
    throw InputError(trace.file, "", fmt::format("a JSON Chrome trace, got {}", what.substr(what.find("] ") + 2)));
  } catch (const json::exception& e) {  // out_of_range.406: a number beyond double, such as 1e400
    const std::string what = e.what();
    throw InputError(trace.file, "", fmt::format("a JSON Chrome trace with finite numbers, got {}",
                                                 what.substr(what.find("] ") + 2)));
  }
  if (!saw_events) throw InputError(trace.file, "/traceEvents", "an array of events (torch.profiler's export)");
  index_trace(trace);
  return trace;
}

}  // namespace twin
