// Why a ratio of sums for a collective's correction: an iteration's time is a sum of op times, so the
// factor that makes the run's total time of a kind exact, sum(measured) / sum(model), is the one that
// matters for the next prediction; a median of per-op ratios would weigh a small op like a large one.
// Medians (not means) for exact shapes: one slow rank or layer does not move an entry.
#include "calibrate/recalibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "cost/collective_tables.hpp"
#include "cost/gemm_predictor.hpp"
#include "calibrate/model_fit.hpp"

namespace twin {
namespace {

using nlohmann::json;

// Linear interpolation between order statistics at (n - 1) * q, q in [0, 1]; `sorted` non-empty.
double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

json measurement_value(const Measurement& m) {
  json out = {{"median_ns", m.median_ns}, {"p10_ns", m.p10_ns}, {"p90_ns", m.p90_ns}, {"samples", m.samples}};
  if (!m.source.empty()) out["source"] = m.source;
  return out;
}

bool is_table_collective(OpKind kind) {
  return kind == OpKind::all_reduce || kind == OpKind::all_gather || kind == OpKind::reduce_scatter ||
         kind == OpKind::all_to_all;
}

// The index of the kernel profile named exactly `gpu` in `profile`, adding a copy of kernels_for(gpu)
// under that name when there is none (a run never edits the estimate of another GPU).
std::size_t kernel_profile_index(Profile& profile, const GpuSpec& gpu, std::vector<ProfileChange>& changes) {
  auto simple = [](std::string_view name) {
    std::string out;
    for (unsigned char c : name)
      if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    return out;
  };
  for (std::size_t i = 0; i < profile.gpus.size(); ++i)
    if (simple(profile.gpus[i].gpu) == simple(gpu.name)) return i;
  GpuKernelProfile copy = profile.kernels_for(gpu);
  const std::string from = copy.gpu;
  copy.gpu = gpu.name;
  profile.gpus.push_back(std::move(copy));
  const std::size_t index = profile.gpus.size() - 1;
  changes.push_back({fmt::format("/gpus/{}", index), nullptr, gpu.name, 0,
                     fmt::format("the run's GPU had no kernel profile of its own: copied from {}", from)});
  return index;
}

// Whether `kernels` prices each step's clock-following kernels at the clock its curve gives the step's duty
// (sim/step_clock.hpp), on prices at its reference clock: a curve and no stated sustained clock.
bool curve_prices_steps(const GpuKernelProfile& kernels) {
  return kernels.reference_sm_clock_MHz > 0 && kernels.sustained_sm_clock_MHz <= 0 &&
         !kernels.sustained_clock.points.empty();
}

struct KindSums {
  double measured_ns = 0;
  double model_ns = 0;
  int ops = 0;
};

void fold_exact_shapes(const Profile& before, Profile& after, const RunMeasurements& run,
                       const std::map<std::pair<std::size_t, std::string>, std::vector<const MeasuredOpSample*>>& groups,
                       std::vector<ProfileChange>& changes) {
  for (const auto& [where, samples] : groups) {
    const auto& [gpu_index, key] = where;
    std::vector<double> times;
    for (const MeasuredOpSample* s : samples) times.push_back(static_cast<double>(s->measured_ns));
    std::sort(times.begin(), times.end());
    Measurement m;
    m.median_ns = quantile(times, 0.5);
    m.p10_ns = quantile(times, 0.1);
    m.p90_ns = quantile(times, 0.9);
    m.samples = static_cast<int>(times.size());
    m.source = run.run;
    GpuKernelProfile& kernels = after.gpus[gpu_index];
    json old_value = nullptr;
    std::string reason = "a shape the profile had no entry for, measured by the run";
    if (auto found = kernels.measured.find(key); found != kernels.measured.end()) {
      old_value = measurement_value(found->second);
      reason = found->second.source.empty() ? "the run measured the shape: replaces the micro-benchmark"
                                            : "the run measured the shape again: replaces " + found->second.source;
    }
    const MeasuredOpSample& first = *samples.front();
    const GpuKernelProfile& priced_by = before.kernels_for(first.gpu);
    const auto earlier = priced_by.measured.find(key);
    const bool earlier_trace = earlier != priced_by.measured.end() && !earlier->second.source.empty();
    // The ratio keeps one basis across folds: the price the shape had before any trace measured it.
    m.priced_ns = earlier_trace && earlier->second.priced_ns > 0 ? earlier->second.priced_ns
                                                                  : training_clock_time_ns(priced_by, first.gpu, first.op);
    if (earlier != priced_by.measured.end()) m.benchmark_ns = benchmark_time_ns(earlier->second);
    // Priced at the reference clock by a profile whose curve gives each step its clock: the clock the curve gave the
    // run's plan is stated, so that shapes near this one take the ratio without it (cost/in_situ.hpp) and apply their
    // own step's clock.
    if (curve_prices_steps(priced_by)) m.run_sm_clock_MHz = traced_sm_clock_MHz(run);
    reason += fmt::format(" (profile priced it {} ns with launch overhead; in the run {:.3f} x the benchmark price {:.0f} ns)",
                          compute_time_ns(before, first.gpu, first.op), m.median_ns / m.priced_ns, m.priced_ns);
    kernels.measured[key] = m;
    changes.push_back({fmt::format("/gpus/{}/measured/{}", gpu_index, key), old_value, measurement_value(m),
                       m.samples, reason});
  }
  for (GpuKernelProfile& kernels : after.gpus) index_measured_shapes(kernels);
}

// Rule 0 for the GPUs the run's samples ran on, each kernel profile once: a profile without a curve that gives the
// run's plan its clock states the run's clock (rule 1 prices on it). A curve is kept as measured: the run's clock goes
// into its shapes' entries instead (rule 1), and what one run's clock says of its plan did not carry to other plans
// and models (docs/ACCURACY.md "A fold that generalizes").
void fold_sm_clock(Profile& after, const RunMeasurements& run, std::vector<ProfileChange>& changes) {
  std::set<std::size_t> folded;
  for (const MeasuredOpSample& s : run.samples) {
    const std::size_t index = kernel_profile_index(after, s.gpu, changes);
    GpuKernelProfile& kernels = after.gpus[index];
    if (!folded.insert(index).second || kernels.reference_sm_clock_MHz <= 0) continue;
    if (run.predicted_sm_clock_MHz > 0 && curve_prices_steps(kernels)) continue;
    const json old_value = kernels.sustained_sm_clock_MHz > 0 ? json(kernels.sustained_sm_clock_MHz) : json(nullptr);
    kernels.sustained_sm_clock_MHz = run.sm_clock_MHz;
    changes.push_back({fmt::format("/gpus/{}/sustained_sm_clock_MHz", index), old_value, run.sm_clock_MHz, 0,
                       fmt::format("the median SM clock of the run's busy GPUs: GEMMs timed at {:.0f} MHz run "
                                   "{:.3f} x longer", kernels.reference_sm_clock_MHz,
                                   kernels.reference_sm_clock_MHz / run.sm_clock_MHz)});
  }
}

// gpu, kind, size, rpn, nodes, an all-to-all's blocks per peer, bytes
using CollectiveKey = std::tuple<std::string, int, int, int, int, int, Bytes>;

void fold_table_rows(Profile& after, const std::map<CollectiveKey, std::vector<TimeNs>>& rows,
                     std::vector<ProfileChange>& changes) {
  for (const auto& [key, times_ns] : rows) {
    const auto& [gpu, kind_index, size, ranks_per_node, nodes, blocks, bytes] = key;
    const auto kind = static_cast<OpKind>(kind_index);
    const std::size_t table_index =
        find_collective_table(after.collectives, gpu, kind, size, ranks_per_node, nodes, blocks) - after.collectives.data();
    CollectiveTable* table = &after.collectives[table_index];
    std::vector<double> times(times_ns.begin(), times_ns.end());
    std::sort(times.begin(), times.end());
    CollectivePoint point;
    point.size_bytes = bytes;
    point.time_us = quantile(times, 0.5) / kNsPerUs;
    point.algbw_GBps = static_cast<double>(bytes) / (point.time_us * 1e3);
    point.busbw_GBps = point.algbw_GBps * busbw_factor(kind, size);
    auto at = std::lower_bound(table->points.begin(), table->points.end(), bytes,
                               [](const CollectivePoint& p, Bytes b) { return p.size_bytes < b; });
    json old_value = nullptr;
    if (at != table->points.end() && at->size_bytes == bytes) {
      old_value = {at->size_bytes, at->time_us, at->algbw_GBps, at->busbw_GBps};
      *at = point;
    } else {
      table->points.insert(at, point);
    }
    changes.push_back({fmt::format("/collectives/tables/{}/rows (size_B {})", table_index, bytes),
                       old_value, json::array({point.size_bytes, point.time_us, point.algbw_GBps, point.busbw_GBps}),
                       static_cast<int>(times.size()),
                       old_value.is_null() ? "a size of a measured placement the table had no row for, measured by the run"
                                           : "the run measured this size of a measured placement: replaces the row"});
  }
}

void fold_corrections(Profile& after, const RunMeasurements& run,
                      const std::map<std::pair<std::size_t, std::string>, KindSums>& sums,
                      std::vector<ProfileChange>& changes) {
  for (const auto& [where, sum] : sums) {
    const auto& [gpu_index, kind] = where;
    if (!(sum.model_ns > 0)) continue;  // zero-work ops: nothing to scale
    KindCorrection& correction = after.gpus[gpu_index].corrections[kind];
    const json old_value = correction.runs.empty() ? json(nullptr) : json(correction.factor);
    auto at = std::lower_bound(correction.runs.begin(), correction.runs.end(), run.run,
                               [](const CorrectionRun& r, const std::string& name) { return r.run < name; });
    const CorrectionRun entry{run.run, sum.measured_ns, sum.model_ns, sum.ops};
    const bool replaced = at != correction.runs.end() && at->run == run.run;
    if (replaced) *at = entry;
    else correction.runs.insert(at, entry);
    double measured = 0, model = 0;
    for (const CorrectionRun& r : correction.runs) {
      measured += r.measured_ns;
      model += r.model_ns;
    }
    correction.factor = measured / model;
    if (!(correction.factor >= 1e-3 && correction.factor <= 1e3))
      throw std::invalid_argument(fmt::format("recalibration: the {} ops of {} measured {} times the model: not a "
                                              "plausible run (expected a factor in [0.001, 1000])",
                                              kind, run.run, correction.factor));
    changes.push_back({fmt::format("/gpus/{}/corrections/kinds/{}/factor", gpu_index, kind), old_value,
                       correction.factor, sum.ops,
                       fmt::format("this run: {} ops measured {:.0f} ns against the model's {:.0f} ns ({}); factor = "
                                   "sum measured / sum model over {} run(s)",
                                   sum.ops, sum.measured_ns, sum.model_ns, replaced ? "replaces its earlier fold" : "added",
                                   correction.runs.size())});
  }
}

// Rule 4: the run's routing joins the runs of its (experts, top-k).
void fold_routing(Profile& after, const MoeRouting& measured, std::vector<ProfileChange>& changes) {
  auto entry = std::find_if(after.moe_routing.begin(), after.moe_routing.end(), [&](const MoeRouting& r) {
    return r.num_experts == measured.num_experts && r.top_k == measured.top_k;
  });
  json old_value = nullptr;
  if (entry == after.moe_routing.end()) {
    after.moe_routing.push_back({measured.num_experts, measured.top_k, {}});
    entry = std::prev(after.moe_routing.end());
  } else {
    old_value = entry->routing_imbalance();
  }
  std::int64_t samples = 0;
  for (const MoeRoutingRun& run : measured.runs) {
    std::erase_if(entry->runs, [&](const MoeRoutingRun& r) { return r.source == run.source; });
    entry->runs.push_back(run);
    samples += run.samples;
  }
  changes.push_back({fmt::format("/moe_routing/experts={},top_k={}", measured.num_experts, measured.top_k), old_value,
                     entry->routing_imbalance(), static_cast<int>(samples),
                     fmt::format("measured routing: busiest expert over the mean, over {} run(s)", entry->runs.size())});
}

}  // namespace

double traced_sm_clock_MHz(const RunMeasurements& run) {
  return run.sm_clock_MHz > 0 ? run.predicted_sm_clock_MHz : 0;
}

Recalibration recalibrate(const Profile& profile, const RunMeasurements& run) {
  if (run.samples.empty()) throw std::invalid_argument("recalibration: " + run.run + " measured no op to fold in");
  Recalibration result{profile, {}};
  Profile& after = result.profile;
  after.builtin = false;
  if (run.sm_clock_MHz > 0) fold_sm_clock(after, run, result.changes);
  const Profile clocked = after;  // the basis of rule 1's prices
  std::map<std::pair<std::size_t, std::string>, std::vector<const MeasuredOpSample*>> shapes;
  std::map<CollectiveKey, std::vector<TimeNs>> rows;
  std::map<std::pair<std::size_t, std::string>, KindSums> sums;
  for (const MeasuredOpSample& s : run.samples) {
    const std::size_t gpu_index = kernel_profile_index(after, s.gpu, result.changes);
    if (!s.op.is_communication()) {
      shapes[{gpu_index, kernel_shape_key(s.op)}].push_back(&s);
      continue;
    }
    if (!is_table_collective(s.op.kind) || s.span.size < 2) continue;
    // An all-to-all in blocks joins the table of its blocks per peer; without one it is corrected as unmeasured.
    const int blocks = s.op.kind == OpKind::all_to_all ? s.op.blocks_per_peer : 1;
    if (find_collective_table(profile.collectives, s.gpu.name, s.op.kind, s.span.size, s.span.ranks_per_node,
                              s.span.nodes, blocks)) {
      rows[{s.gpu.name, static_cast<int>(s.op.kind), s.span.size, s.span.ranks_per_node, s.span.nodes, blocks,
            s.op.bytes}]
          .push_back(s.measured_ns);
      continue;
    }
    KindSums& sum = sums[{gpu_index, to_string(s.op.kind)}];
    sum.measured_ns += static_cast<double>(s.measured_ns);
    sum.model_ns += s.model_ns;
    ++sum.ops;
  }
  fold_exact_shapes(clocked, after, run, shapes, result.changes);
  fold_table_rows(after, rows, result.changes);
  fold_corrections(after, run, sums, result.changes);
  if (run.routing) fold_routing(after, *run.routing, result.changes);
  json& recalibrated = after.provenance["recalibrated_from"];
  if (!recalibrated.is_array()) recalibrated = json::array();
  if (std::find(recalibrated.begin(), recalibrated.end(), run.run) == recalibrated.end()) recalibrated.push_back(run.run);
  return result;
}

json changes_json(const Recalibration& result, const std::string& run, const std::string& profile_path,
                  const std::string& previous_path, const json& effect) {
  json changes = json::array();
  for (const ProfileChange& c : result.changes)
    changes.push_back({{"entry", c.entry}, {"old", c.old_value}, {"new", c.new_value}, {"samples", c.samples},
                       {"reason", c.reason}});
  return {{"format", "twin-profile-changes"}, {"version", 1},       {"source_run", run},
          {"profile", profile_path},         {"previous", previous_path.empty() ? json(nullptr) : json(previous_path)},
          {"effect", effect},                {"changes", changes}};
}

std::string changes_markdown(const json& record) {
  auto cell = [](const json& value) {
    std::string text = value.is_null() ? "–" : value.is_string() ? value.get<std::string>() : value.dump();
    std::replace(text.begin(), text.end(), '|', '/');
    return text;
  };
  std::string md = fmt::format("# Profile changes from {}\n\nProfile: `{}`; previous version: {}.\n\n",
                               record.at("source_run").get<std::string>(), record.at("profile").get<std::string>(),
                               record.at("previous").is_null() ? "none (a new file)"
                                                               : fmt::format("`{}`", record.at("previous").get<std::string>()));
  const json& effect = record.at("effect");
  if (effect.is_object() && effect.contains("measured_iteration_ns"))
    md += fmt::format("The run's plan re-simulated: {} ns before, {} ns after; measured {} ns (error {:+.2f}% -> {:+.2f}%).\n\n",
                      effect.at("predicted_before_ns").get<std::int64_t>(), effect.at("predicted_after_ns").get<std::int64_t>(),
                      effect.at("measured_iteration_ns").get<std::int64_t>(), 100 * effect.at("error_before").get<double>(),
                      100 * effect.at("error_after").get<double>());
  md += "| entry | old | new | samples | why |\n| --- | --- | --- | --- | --- |\n";
  for (const json& c : record.at("changes"))
    md += fmt::format("| `{}` | {} | {} | {} | {} |\n", cell(c.at("entry")), cell(c.at("old")), cell(c.at("new")),
                      c.at("samples").get<int>(), cell(c.at("reason")));
  return md;
}

}  // namespace twin
