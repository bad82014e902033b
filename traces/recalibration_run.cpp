// The join is by identity, not by position: a row's op_id indexes the class the plan lowers to again, and
// its name and kind must be that op's, so ops.csv of another plan (or another lowering) is refused rather
// than folded into the wrong shapes. The plan is re-simulated before and after only to record the effect.
#include "traces/recalibration_run.hpp"
#include "traces/gpu_clocks.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>
#include <sstream>

#include <fmt/format.h>

#include "cost/shipped_profiles.hpp"
#include "core/atomic_file.hpp"
#include "core/attention_implementation.hpp"
#include "core/kernel_revisions.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "sim/collectives.hpp"
#include "sim/flat_graph.hpp"
#include "sim/simulate.hpp"
#include "sim/step_clock.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "traces/ops_csv_reader.hpp"
#include "traces/run_metrics.hpp"
#include "traces/plan_prediction.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_text(const fs::path& path, const std::string& what) { return read_input_file(path, what); }

fs::path beside(const fs::path& path, const std::string& suffix) {
  return path.parent_path() / (path.stem().string() + suffix);
}


// The row's op in the plan, checked: its class and index exist, and its name and kind are the plan's.
const Op& plan_op_of(const OpsCsvRow& row, const IterationGraph& graph, const std::string& file) {
  const int line = row.line;
  if (row.rank_class < 0 || row.rank_class >= static_cast<int>(graph.classes.size()))
    throw InputError(file, fmt::format("line {}, column rank_class", line),
                     fmt::format("a rank class of the plan (0 to {})", graph.classes.size() - 1));
  const int c = row.rank_class;
  const RankClass& rank_class = graph.classes[static_cast<std::size_t>(c)];
  if (row.op_index >= rank_class.size())
    throw InputError(file, fmt::format("line {}, column op_id", line),
                     fmt::format("an op of class {} (0 to {})", c, rank_class.size() - 1));
  const Op& op = rank_class.op(row.op_index);
  if (row.name != op_name(op) || row.kind != to_string(op.kind))
    throw InputError(file, fmt::format("line {}, columns name and kind", line),
                     fmt::format("op {} of class {} of the plan: {} ({}), not {} ({}): ops.csv of another plan?",
                                 row.op_index, c, op_name(op), to_string(op.kind), row.name, row.kind));
  return op;
}

// A measured op as the fold takes it; a collective with the time its links alone would give it.
MeasuredOpSample sample_of(const OpsCsvRow& row, const Op& op, const RankClass& rank_class, const Cluster& cluster,
                           const Profile& profile, const std::string& file) {
  MeasuredOpSample sample;
  sample.op = op;
  const NodeGroup& group = cluster.node_groups.at(static_cast<std::size_t>(rank_class.node_group));
  sample.gpu = group.gpu;
  sample.rank = row.rank;
  sample.rank_class = row.rank_class;
  sample.index = row.op_index;
  sample.measured_ns = *row.measured_median_ns;
  if (op.is_communication()) {
    const GroupSpan* span = rank_class.span_of(op.group, op.group_size);
    if (!span) throw std::logic_error(fmt::format("{}: the lowering gave {} no group span", file, op_name(op)));
    sample.span = *span;
    const sim::LinkParams links = sim::link_params(group, cluster.network, profile);
    sample.model_ns =
        sim::isolated_time_ns(sim::collective_plan(op, *span, links), static_cast<double>(op.bytes), links);
  }
  return sample;
}

}  // namespace

RecalibrateOutcome fold_destination(const fs::path& folder, const std::string& profile, const std::string& out) {
  RecalibrateOutcome outcome;
  outcome.profile_path = !out.empty()                ? fs::path(out)
                         : is_named_profile(profile) ? folder / "profile.json"
                                                     : fs::path(profile);
  if (fs::exists(outcome.profile_path)) outcome.previous_path = previous_profile_path(outcome.profile_path);
  outcome.changes_json = beside(outcome.profile_path, ".changes.json");
  outcome.changes_md = beside(outcome.profile_path, ".changes.md");
  return outcome;
}

RunMeasurements read_run_measurements(const fs::path& ops_csv, const IterationGraph& graph, const Cluster& cluster,
                                      const Profile& profile, const std::string& run) {
  const std::string file = ops_csv.string();
  RunMeasurements result;
  result.run = run;
  // (rank, class) -> the line of each op's row, 0 before it: a rank runs one class per part of the step (hot
  // switching's phases). Four bytes an op, where a map entry per row took twenty times that.
  std::map<std::pair<int, int>, std::vector<int>> seen;
  for_each_ops_csv_row(ops_csv, [&](const OpsCsvRow& row) {
    const Op& op = plan_op_of(row, graph, file);
    const RankClass& rank_class = graph.classes[static_cast<std::size_t>(row.rank_class)];
    std::vector<int>& lines = seen[{row.rank, row.rank_class}];
    if (lines.empty()) lines.assign(rank_class.size(), 0);
    if (lines[row.op_index] != 0)
      throw InputError(file, fmt::format("line {}", row.line),
                       fmt::format("one row per rank, class and op (rank {} class {} op {} is on line {} too)",
                                   row.rank, row.rank_class, row.op_index, lines[row.op_index]));
    lines[row.op_index] = row.line;
    if (!row.measured_median_ns) {
      ++result.absent_ops;
      return;
    }
    if (op.kind == OpKind::send || op.kind == OpKind::recv) {
      ++result.point_to_point_ops;
      return;
    }
    // Beside the other strand's compute (double strand) an op shares the GPU: its time is not the one a profile
    // holds, its time alone.
    if (!op.is_communication() && row.shared_gpu_iterations > 0) {
      ++result.shared_gpu_ops;
      return;
    }
    result.samples.push_back(sample_of(row, op, rank_class, cluster, profile, file));
  });
  return result;
}

// The step clock the profile gives the plan's rank classes (sim/step_clock.hpp), their mean; 0 where it gives none.
double predicted_step_clock_MHz(const IterationGraph& graph, const Cluster& cluster, const Profile& profile) {
  double sum = 0;
  int classes = 0;
  for (const RankClass& rank_class : graph.classes) {
    const GpuSpec& gpu = cluster.node_groups.at(static_cast<std::size_t>(rank_class.node_group)).gpu;
    const double clock_MHz = sim::step_clock(rank_class, profile, gpu, nullptr).sm_MHz;
    if (clock_MHz > 0) sum += clock_MHz, ++classes;
  }
  return classes > 0 ? sum / classes : 0;
}

// The run's busy clock (its gpu_clocks.csv, where recorded) and the clock the profile's curve gives its plan: what
// rules 0 and 1 state the run's clock from.
void measure_run_clocks(const fs::path& run_dir, const IterationGraph& graph, const Cluster& cluster,
                        const Profile& before, RunMeasurements& measured) {
  if (const fs::path clocks = run_dir / "gpu_clocks.csv"; fs::exists(clocks))
    if (const std::optional<GpuClockSummary> summary = read_gpu_clocks(clocks)) measured.sm_clock_MHz = summary->sm_clock_MHz;
  measured.predicted_sm_clock_MHz = predicted_step_clock_MHz(graph, cluster, before);
}

// The record's "effect": the plan predicted before and after the fold, what was folded and left out, the clocks, and
// the run's own measured step where it has one.
json fold_effect(const IterationGraph& graph, const Cluster& cluster, const Profile& before, const Profile& after,
                 const RunMeasurements& measured, std::optional<TimeNs> measured_ns) {
  const TimeNs predicted_before = simulate_iteration(graph, cluster, before).iteration_ns;
  const TimeNs predicted_after = simulate_iteration(graph, cluster, after).iteration_ns;
  json effect = {{"predicted_before_ns", predicted_before}, {"predicted_after_ns", predicted_after},
                 {"ops_folded", measured.samples.size()}, {"ops_absent", measured.absent_ops},
                 {"ops_point_to_point", measured.point_to_point_ops},
                 {"ops_shared_gpu", measured.shared_gpu_ops},
                 {"ops_other_attention", measured.other_attention_ops},
                 {"ops_other_kernel_revision", measured.other_kernel_ops}};
  // The run's busy clock beside the one the profile's curve gives its plan: said, not folded into the curve (rule 0).
  if (measured.sm_clock_MHz > 0 && measured.predicted_sm_clock_MHz > 0) {
    effect["run_sm_clock_MHz"] = measured.sm_clock_MHz;
    effect["curve_sm_clock_MHz"] = measured.predicted_sm_clock_MHz;
    effect["traced_sm_clock_MHz"] = traced_sm_clock_MHz(measured);  // what the run's shapes state (rule 1)
  }
  if (measured_ns) {
    effect["measured_iteration_ns"] = *measured_ns;
    effect["error_before"] = static_cast<double>(*measured_ns) / static_cast<double>(predicted_before) - 1;
    effect["error_after"] = static_cast<double>(*measured_ns) / static_cast<double>(predicted_after) - 1;
  }
  return effect;
}

fs::path previous_profile_path(const fs::path& path) {
  fs::path candidate = beside(path, ".previous.json");
  for (int n = 2; fs::exists(candidate); ++n) candidate = beside(path, fmt::format(".previous-{}.json", n));
  return candidate;
}

// Leaves out of `measured` the ops whose kernels are not the ones `before` prices: attention of another implementation
// than the default, and kinds the run ran in another kernel revision than the profile's calibration timed.
void leave_out_other_kernels(const RunMetrics& metrics, const Profile& before, RunMeasurements& measured) {
  // Profiles price the attention `twin execute` runs by default (what calibration times): a run of another
  // implementation (--attention) keeps its other ops, not its attention's. Runs from before the choice existed
  // name none and ran twin's own kernels, which the profiles of then priced.
  if (metrics.attention && *metrics.attention != to_string(kDefaultAttentionImplementation))
    std::erase_if(measured.samples, [&](const MeasuredOpSample& s) {
      const bool attention = s.op.kind == OpKind::attention_forward || s.op.kind == OpKind::attention_backward;
      measured.other_attention_ops += attention;
      return attention;
    });
  // A kind whose kernel the run ran in another revision than the profile's calibration timed
  // (core/kernel_revisions.hpp) measured another kernel: its ops are left out.
  const nlohmann::json& profile_revisions =
      before.provenance.is_object() && before.provenance.contains("kernel_revisions")
          ? before.provenance.at("kernel_revisions") : nlohmann::json();
  std::erase_if(measured.samples, [&](const MeasuredOpSample& s) {
    const bool other = recorded_kernel_revision(metrics.kernel_revisions, s.op.kind) !=
                       recorded_kernel_revision(profile_revisions, s.op.kind);
    measured.other_kernel_ops += other;
    return other;
  });
}

RecalibrateOutcome recalibrate_from_run(const RecalibrateRequest& request) {
  const fs::path run_dir = request.run_dir;
  if (!fs::is_directory(run_dir)) throw InputError(run_dir.string(), "", "a run folder of twin execute");
  const Plan plan = read_plan(run_dir / "best.json");
  const std::string profile_name = request.profile.empty() ? plan.profile : request.profile;
  if (profile_name.empty())
    throw InputError((run_dir / "best.json").string(), "/profile", "the profile the plan was simulated with (or give --profile)");
  const Profile before = load_profile(profile_name);
  const IterationGraph graph = plan_graphs(plan, (run_dir / "best.json").string()).graph;
  read_plan_prediction(plan.document, graph, (run_dir / "best.json").string());  // the plan names these ops
  const std::string run = "trace:" + fs::weakly_canonical(run_dir).generic_string();
  RunMeasurements measured =
      read_run_measurements(run_dir / "ops.csv", graph, plan.scenario.cluster, before, run);
  // metrics.json is read as `twin report` reads it: the two commands accept the same folders.
  const fs::path metrics_path = run_dir / "metrics.json";
  const RunMetrics metrics = parse_run_metrics(
      parse_input_json(read_input_file(metrics_path, "metrics.json of twin execute", kMaxRunFileBytes),
                       metrics_path.string()),
      metrics_path.string());
  if (metrics.strategy != plan.strategy.key())
    throw InputError(metrics_path.string(), "/strategy",
                     fmt::format("\"{}\" (the strategy of best.json), got \"{}\": the run is of another plan",
                                 plan.strategy.key(), metrics.strategy));
  const std::optional<TimeNs> measured_ns = metrics.kernel_span_iteration_ns;
  leave_out_other_kernels(metrics, before, measured);
  if (metrics.moe_routing && metrics.moe_routing->samples > 0) {
    const MeasuredRouting& r = *metrics.moe_routing;
    measured.routing = MoeRouting{r.num_experts, r.top_k, {{run, r.samples, r.tokens_per_micro_batch, r.imbalance_mean}}};
  }
  measure_run_clocks(run_dir, graph, plan.scenario.cluster, before, measured);
  const Recalibration result = recalibrate(before, measured);
  const json effect = fold_effect(graph, plan.scenario.cluster, before, result.profile, measured, measured_ns);

  RecalibrateOutcome outcome = fold_destination(run_dir, profile_name, request.out);
  const bool replaces = !outcome.previous_path.empty();
  outcome.record = changes_json(result, run, outcome.profile_path.generic_string(),
                                outcome.previous_path.generic_string(), effect);
  const std::string profile_text = to_json(result.profile).dump(2) + "\n";
  const std::string previous_text = replaces ? read_text(outcome.profile_path, "the profile to replace") : "";

  if (replaces) write_file_atomically(outcome.previous_path, previous_text);
  write_file_atomically(outcome.changes_json, outcome.record.dump(2) + "\n");
  write_file_atomically(outcome.changes_md, changes_markdown(outcome.record));
  write_file_atomically(outcome.profile_path, profile_text);
  return outcome;
}

}  // namespace twin
