// The join groups records by (op, iteration) in ordered maps, so the result does not depend on the
// order CUPTI delivered them in; validation happens first, so a bad record never yields half a result.
#include "traces/measured_ops.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <stdexcept>

#include <fmt/format.h>

namespace twin {
namespace {

constexpr std::uint64_t kLowMask = 0xffffffffULL;

void check_kernel(const RankClass& rank_class, const MeasuredKernel& kernel, int rank) {
  if ((kernel.iteration < 0) != !kernel.in_op())
    throw std::invalid_argument(fmt::format(
        "measured kernel '{}' on rank {}: iteration {} and op {} must both be set or both be absent", kernel.name,
        rank, kernel.iteration, kernel.in_op() ? std::to_string(kernel.op) : std::string("none")));
  if (kernel.in_op() && kernel.op >= rank_class.size())
    throw std::invalid_argument(fmt::format(
        "measured kernel '{}' on rank {} (iteration {}) names op index {}, but class {} ('{}') has {} ops "
        "(indices 0..{}): the executor ran another graph than the plan's",
        kernel.name, rank, kernel.iteration, kernel.op, rank_class.index, rank_class.label, rank_class.size(),
        rank_class.size() == 0 ? 0 : rank_class.size() - 1));
  if (kernel.end_ns < kernel.start_ns)
    throw std::invalid_argument(fmt::format("measured kernel '{}' on rank {} ends ({} ns) before it starts ({} ns)",
                                            kernel.name, rank, kernel.end_ns, kernel.start_ns));
}

struct Interval {
  TimeNs start_ns = std::numeric_limits<TimeNs>::max();
  TimeNs end_ns = std::numeric_limits<TimeNs>::min();
  int kernels = 0;

  void add(const MeasuredKernel& kernel) {
    start_ns = std::min(start_ns, kernel.start_ns);
    end_ns = std::max(end_ns, kernel.end_ns);
    ++kernels;
  }
};

// Sets shared_gpu_iterations from the ops' spans (first kernel start to last end: an op's duration) in each
// iteration: a compute op shared the GPU when its span overlaps the span of a compute op of another graph stream,
// whether their kernels ran at once or one's kernels ran between the other's, or the span of a communication op
// whose kernel is NCCL's (it holds SMs while it runs, a receive also while it waits for its sender). Spans of one
// stream never overlap (its ops run in order), so, sorted by start, a span overlaps one of another stream exactly
// when that stream's latest span so far still runs when it starts.
void mark_shared_gpu(const RankClass& rank_class, const std::map<std::pair<OpIndex, std::int32_t>, Interval>& spans,
                     std::vector<OpMeasurement>& ops) {
  struct Span {
    TimeNs start_ns, end_ns;
    Stream stream;
    OpIndex op;
    std::int32_t iteration;
    bool compute;
  };
  std::vector<Span> sharing;  // compute ops, and communication ops that run NCCL kernels
  for (const auto& [key, interval] : spans) {
    const Op& op = rank_class.op(key.first);
    const bool compute = !op.is_communication();
    if (compute || op.comm_kernel == CommKernel::nccl)
      sharing.push_back({interval.start_ns, interval.end_ns, op.stream, key.first, key.second, compute});
  }
  std::sort(sharing.begin(), sharing.end(), [](const Span& a, const Span& b) {
    return std::tie(a.start_ns, a.stream, a.op) < std::tie(b.start_ns, b.stream, b.op);
  });
  std::map<Stream, const Span*> latest;                 // per stream: its span that started last so far
  std::set<std::pair<OpIndex, std::int32_t>> shared;   // (compute op, iteration)
  for (const Span& span : sharing) {
    for (const auto& [stream, other] : latest)
      if (stream != span.stream && other->end_ns > span.start_ns) {
        if (span.compute) shared.insert({span.op, span.iteration});
        if (other->compute) shared.insert({other->op, other->iteration});
      }
    latest[span.stream] = &span;
  }
  for (const auto& [op, iteration] : shared) ++ops[op].shared_gpu_iterations;
}

}  // namespace

std::uint64_t encode_region(std::int32_t iteration, OpIndex op) {
  if (iteration < 0 || op == kNoOp)
    throw std::invalid_argument(fmt::format("encode_region: iteration {} and op {} cannot be encoded", iteration, op));
  return (static_cast<std::uint64_t>(iteration) + 1) << 32 | (static_cast<std::uint64_t>(op) + 1);
}

RegionId decode_region(std::uint64_t region) {
  if (region == 0) return {};
  const std::uint64_t high = region >> 32;
  const std::uint64_t low = region & kLowMask;
  if (high == 0 || low == 0 || high - 1 > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::invalid_argument(
        fmt::format("decode_region: {:#x} is no (iteration + 1) << 32 | (op + 1) region id", region));
  return {static_cast<std::int32_t>(high - 1), static_cast<OpIndex>(low - 1)};
}

MeasuredKernel measured_kernel(std::string name, std::uint64_t start_ns, std::uint64_t end_ns,
                               std::uint32_t stream_id, std::uint64_t region) {
  const RegionId id = decode_region(region);
  return {std::move(name), static_cast<std::int64_t>(start_ns), static_cast<std::int64_t>(end_ns), stream_id,
          id.iteration, id.op};
}

TimeNs median_ns(std::vector<TimeNs> values) {
  if (values.empty()) throw std::invalid_argument("median_ns of no values");
  const std::size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  const TimeNs upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  const TimeNs lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return std::midpoint(lower, upper);
}

std::optional<double> relative_error(std::optional<TimeNs> measured_ns, std::optional<TimeNs> predicted_ns) {
  if (!measured_ns || !predicted_ns || *predicted_ns <= 0) return std::nullopt;
  return static_cast<double>(*measured_ns) / static_cast<double>(*predicted_ns) - 1.0;
}

void check_measured_kernels(const RankClass& rank_class, const std::vector<MeasuredKernel>& kernels, int rank) {
  for (const MeasuredKernel& kernel : kernels) check_kernel(rank_class, kernel, rank);
}

MeasuredRank join_measured_ops(const RankClass& rank_class, const std::vector<MeasuredKernel>& kernels, int rank) {
  check_measured_kernels(rank_class, kernels, rank);

  MeasuredRank measured;
  measured.rank = rank;
  measured.rank_class = rank_class.index;
  std::map<std::int32_t, Interval> iterations;
  std::map<std::pair<OpIndex, std::int32_t>, Interval> op_iterations;
  std::vector<std::set<std::uint32_t>> streams(rank_class.size());
  for (const MeasuredKernel& kernel : kernels) {
    if (!kernel.in_op()) {
      ++measured.kernels_outside_ops;
      continue;
    }
    iterations[kernel.iteration].add(kernel);
    op_iterations[{kernel.op, kernel.iteration}].add(kernel);
    streams[kernel.op].insert(kernel.stream_id);
  }

  std::map<std::int32_t, std::size_t> slot;  // iteration -> position in measured.iterations
  std::vector<TimeNs> spans;
  for (const auto& [iteration, interval] : iterations) {
    slot[iteration] = measured.iterations.size();
    measured.iterations.push_back(iteration);
    measured.iteration_spans.push_back({iteration, interval.start_ns, interval.end_ns});
    spans.push_back(interval.end_ns - interval.start_ns);
  }
  if (!spans.empty()) measured.median_iteration_ns = median_ns(spans);

  measured.ops.resize(rank_class.size());
  for (OpIndex i = 0; i < rank_class.size(); ++i) {
    measured.ops[i].duration_ns.assign(measured.iterations.size(), std::nullopt);
    measured.ops[i].stream_ids.assign(streams[i].begin(), streams[i].end());
  }
  for (const auto& [key, interval] : op_iterations) {
    OpMeasurement& op = measured.ops[key.first];
    op.duration_ns[slot.at(key.second)] = interval.end_ns - interval.start_ns;
    op.kernels = std::max(op.kernels, interval.kernels);
  }
  mark_shared_gpu(rank_class, op_iterations, measured.ops);
  for (OpMeasurement& op : measured.ops) {
    std::vector<TimeNs> durations;
    for (const auto& duration : op.duration_ns)
      if (duration) durations.push_back(*duration);
    if (durations.empty()) continue;
    op.median_ns = median_ns(durations);
    op.min_ns = *std::min_element(durations.begin(), durations.end());
    op.max_ns = *std::max_element(durations.begin(), durations.end());
  }
  return measured;
}

}  // namespace twin
