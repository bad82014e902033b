// Every field of metrics.json checked for type and range; errors name the file and JSON path.
#include "traces/run_metrics.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/json_reader.hpp"

namespace twin {
namespace {

constexpr double kMaxSeconds = 1e9;

std::string any_string(const JsonReader& field) {
  if (!field.value().is_string()) field.fail("expected a string");
  return field.value().get<std::string>();
}

std::optional<double> optional_number(const JsonReader& object, std::string_view key) {
  const std::optional<JsonReader> field = object.find(key);
  if (!field) return std::nullopt;
  return field->number(-1e300, 1e300, "a number");
}

TimeNs seconds_to_ns(const JsonReader& field) {
  return static_cast<TimeNs>(std::llround(field.number(0, kMaxSeconds, "a time in seconds, at least 0") * 1e9));
}

void read_ranks(const JsonReader& root, RunMetrics& metrics) {
  for (const JsonReader& rank : root.required("ranks").non_empty_elements()) {
    rank.expect_object();
    RankMetrics entry;
    entry.rank = static_cast<int>(rank.required("rank").integer(0, INT32_MAX));
    entry.rank_class = static_cast<int>(rank.required("rank_class").integer(0, INT32_MAX));
    entry.median_step_ns = seconds_to_ns(rank.required("median_iteration_s"));
    entry.peak_memory_GiB = rank.required("peak_memory_GiB").number(0, 1e9, "GiB, at least 0");
    entry.predicted_peak_memory_GiB = rank.required("predicted_peak_memory_GiB").number(0, 1e9, "GiB, at least 0");
    // A rank runs one class per part of the step (hot switching's phases): (rank, class) pairs ascend.
    if (!metrics.ranks.empty() && std::pair(entry.rank, entry.rank_class) <=
                                      std::pair(metrics.ranks.back().rank, metrics.ranks.back().rank_class))
      rank.required("rank").fail("expected ranks in ascending order, each (rank, rank_class) once");
    metrics.ranks.push_back(entry);
  }
}

MeasuredRouting read_routing(const JsonReader& routing) {
  MeasuredRouting r;
  r.num_experts = static_cast<int>(routing.required("num_experts").integer(1, INT32_MAX));
  r.top_k = static_cast<int>(routing.required("top_k").integer(1, r.num_experts));
  r.tokens_per_micro_batch = routing.required("tokens_per_micro_batch").integer(1, INT64_MAX);
  r.samples = routing.required("samples").integer(0, INT64_MAX);
  if (r.samples > 0) r.imbalance_mean = routing.required("imbalance_mean").number(1.0, 1e6, "a load ratio, at least 1");
  return r;
}

// The kernel-span medians, each given to the rank (and class, where named) /ranks lists.
void read_kernel_span(const JsonReader& span, RunMetrics& metrics) {
  if (const std::optional<JsonReader> iteration = span.find("measured_iteration_ns"))
    metrics.kernel_span_iteration_ns = iteration->integer(0, std::numeric_limits<TimeNs>::max());
  for (const JsonReader& rank : span.required("ranks").elements()) {
    const JsonReader rank_field = rank.required("rank");
    const int id = static_cast<int>(rank_field.integer(0, INT32_MAX));
    const std::optional<JsonReader> class_field = rank.find("rank_class");
    const std::optional<std::int64_t> rank_class =
        class_field ? std::optional(class_field->integer(0, INT32_MAX)) : std::nullopt;
    RankMetrics* entry = nullptr;
    for (RankMetrics& candidate : metrics.ranks)
      if (candidate.rank == id && (!rank_class || candidate.rank_class == *rank_class)) entry = &candidate;
    if (!entry) rank_field.fail("expected a rank listed in /ranks");
    if (const std::optional<JsonReader> median = rank.find("measured_median_ns"))
      entry->kernel_span_ns = median->integer(0, std::numeric_limits<TimeNs>::max());
  }
}

}  // namespace

RunMetrics parse_run_metrics(const nlohmann::json& document, const std::string& source) {
  const JsonReader root(document, source);
  root.expect_object();
  root.required("format").one_of({"twin-execute-run"}, "format (metrics.json of twin execute)");
  RunMetrics metrics;
  metrics.scenario = any_string(root.required("scenario"));
  metrics.strategy = any_string(root.required("strategy"));
  metrics.device = any_string(root.required("device"));
  metrics.world_size = root.required("world_size").positive_int();
  metrics.warmup_iterations = static_cast<int>(root.required("warmup_iterations").integer(0, INT32_MAX));
  metrics.loss_first = optional_number(root, "loss_first");
  metrics.loss_last = optional_number(root, "loss_last");
  const JsonReader measured = root.required("measured");
  metrics.measured_iteration_ns = seconds_to_ns(measured.required("iteration_s"));
  metrics.measured_tokens_per_s = measured.required("tokens_per_s").number(0, 1e300, "tokens per second, at least 0");
  metrics.measured_mfu = measured.required("mfu").number(0, 1e3, "a fraction, at least 0");
  for (const JsonReader& step : root.required("steps").non_empty_elements()) {
    step.expect_object();
    metrics.steps.push_back({static_cast<int>(step.required("step").integer(1, INT32_MAX)), optional_number(step, "loss"),
                             seconds_to_ns(step.required("iteration_s")), step.required("measured").boolean()});
  }
  read_ranks(root, metrics);
  if (const std::optional<JsonReader> attention = root.find("attention")) metrics.attention = attention->string();
  if (const std::optional<JsonReader> revisions = root.find("kernel_revisions")) {
    revisions->expect_object();
    for (const auto& [kind, revision] : revisions->value().items())
      revisions->required(kind).integer(1, 1000000);  // a number per kind: the revision it ran
    metrics.kernel_revisions = revisions->value();
  }
  if (const std::optional<JsonReader> routing = root.find("moe_routing")) metrics.moe_routing = read_routing(*routing);
  if (const std::optional<JsonReader> span = root.find("kernel_span")) read_kernel_span(*span, metrics);
  return metrics;
}

}  // namespace twin
