// Rows predicted one after another (each row's search uses the threads), summaries, the prior fit, and the
// CSV / Markdown outputs (fixed decimals: the same table and profile give the same bytes).
#include "validation/validation_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "cost/fitted_parameters.hpp"
#include "core/text_format.hpp"
#include "strategies/families/families.hpp"
#include "strategies/search.hpp"

namespace twin {

namespace {

bool chosen(const PublishedRow& row, const std::vector<std::string>& groups) {
  return groups.empty() || std::find(groups.begin(), groups.end(), row.group) != groups.end();
}

RowPrediction predict_row(const PublishedTable& table, const PublishedRow& row, const Profile& profile,
                          const ValidationOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  RowPrediction p;
  p.row = &row;
  const Profile for_row = profile_for_cluster(profile, row.scenario.cluster,
                                              options.scale_profile || row.scenario.profile_scaling, table.source,
                                              row.json_path + "/scenario");
  SearchOptions search_options;
  search_options.jobs = options.jobs;
  search_options.full_replay = options.full_replay;
  search_options.whole_top = 1;  // the row's prediction is its winner's whole replay
  const std::vector<Candidate> ranked = search(row.scenario, for_row, plan_families(), search_options);
  p.candidates = static_cast<int>(ranked.size());
  p.simulated = static_cast<int>(std::count_if(ranked.begin(), ranked.end(), [](const Candidate& c) {
    return c.result.iteration_ns > 0;
  }));
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (ranked.empty() || !ranked.front().feasible) {
    p.reason = ranked.empty() ? "no candidate" : ranked.front().infeasible_reason;
    return p;
  }
  const Candidate& best = ranked.front();
  p.feasible = true;
  p.best = best.key();
  p.predicted_s = best.throughput.iteration_s;
  p.error = p.predicted_s / row.published_iteration_s - 1;
  p.mfu = best.throughput.mfu;
  p.breakdown = best.result.breakdown;
  return p;
}

double mean_signed_error(const std::vector<RowPrediction>& rows) {
  double sum = 0;
  int n = 0;
  for (const RowPrediction& r : rows)
    if (r.feasible) {
      sum += r.error;
      ++n;
    }
  return n ? sum / n : 0;
}

std::string seconds(TimeNs ns) { return fixed(static_cast<double>(ns) / 1e9, 3); }

}  // namespace

std::vector<RowPrediction> predict_table(const PublishedTable& table, const Profile& profile,
                                         const ValidationOptions& options) {
  std::vector<RowPrediction> out;
  for (const PublishedRow& row : table.rows) {
    if (!chosen(row, options.groups)) continue;
    out.push_back(predict_row(table, row, profile, options));
    if (options.on_row) options.on_row(out.back());
  }
  return out;
}

std::vector<GroupSummary> summarize(const std::vector<RowPrediction>& rows) {
  std::vector<GroupSummary> groups;
  GroupSummary all{"all"};
  const auto add = [](GroupSummary& g, double error) {
    g.mean_abs_error += std::abs(error);
    g.mean_error += error;
    g.max_abs_error = std::max(g.max_abs_error, std::abs(error));
    ++g.rows;
  };
  for (const RowPrediction& r : rows) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const GroupSummary& s) { return s.group == r.row->group; });
    if (g == groups.end()) g = groups.insert(groups.end(), GroupSummary{r.row->group});
    if (!r.feasible) continue;
    add(*g, r.error);
    add(all, r.error);
  }
  groups.push_back(all);
  for (GroupSummary& g : groups)
    if (g.rows > 0) {
      g.mean_abs_error /= g.rows;
      g.mean_error /= g.rows;
    }
  return groups;
}

Profile with_in_situ_prior(Profile profile, const std::string& gpus, double factor) {
  FittedParameter parameter;  // an ad-hoc parameter over `gpus`: the one definition of what it prices
  parameter.gpus = gpus;
  if (std::none_of(profile.gpus.begin(), profile.gpus.end(),
                   [&](const GpuKernelProfile& kernels) { return applies_to(parameter, kernels.gpu); }))
    throw InputError(profile.name, "/gpus", fmt::format("a kernel profile of GPU or family \"{}\"", gpus));
  return with_fitted_value(std::move(profile), parameter, factor);
}

// The iteration time is close to affine in the factor (compute scales with it, communication does not), so
// secant steps on the mean signed error converge in a few predictions of the groups.
PriorFit fit_in_situ_prior(const PublishedTable& table, const Profile& profile, const std::string& family,
                           const ValidationOptions& options) {
  PriorFit fit;
  const auto error_at = [&](double factor) {
    ValidationOptions quiet = options;
    quiet.on_row = nullptr;
    const double error = mean_signed_error(predict_table(table, with_in_situ_prior(profile, family, factor), quiet));
    fit.steps.emplace_back(factor, error);
    return error;
  };
  double x0 = 1.0, e0 = error_at(x0);
  double x1 = x0 / (1 + e0), e1 = error_at(x1);  // error ~ f/f_true - 1
  for (int step = 0; step < 6 && std::abs(e1) > 1e-4 && e1 != e0; ++step) {
    const double x2 = std::clamp(x1 - e1 * (x1 - x0) / (e1 - e0), 0.5, 2.0);
    x0 = x1, e0 = e1;
    x1 = x2, e1 = error_at(x1);
  }
  fit.factor = x1;
  return fit;
}

std::string percent(double fraction) { return fixed(100 * fraction, 1) + "%"; }

std::string validation_csv_header() {
  return "id,group,confidence,published_iteration_s,predicted_iteration_s,error,predicted_mfu,best,candidates,"
         "compute_s,exposed_communication_s,pipeline_bubble_s,optimizer_s,infeasible_reason";
}

std::string validation_csv_line(const RowPrediction& r) {
  const PublishedRow& row = *r.row;
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_field(row.id), csv_field(row.group),
                     row.confidence, fixed(row.published_iteration_s, 4), r.feasible ? fixed(r.predicted_s, 4) : "",
                     r.feasible ? fixed(r.error, 4) : "", r.feasible ? fixed(r.mfu, 4) : "", csv_field(r.best),
                     r.candidates, seconds(r.breakdown.compute_ns), seconds(r.breakdown.exposed_communication_ns),
                     seconds(r.breakdown.bubble_ns), seconds(r.breakdown.optimizer_ns), csv_field(r.reason));
}

std::string validation_csv(const std::vector<RowPrediction>& rows) {
  std::string out = validation_csv_header() + "\n";
  for (const RowPrediction& r : rows) out += validation_csv_line(r) + "\n";
  return out;
}

std::string validation_markdown(const std::vector<RowPrediction>& rows, const std::string& profile_name) {
  std::string out = fmt::format("Profile: `{}`. Error = predicted / published iteration time - 1 "
                                "(negative: twin predicts too fast).\n\n",
                                profile_name);
  out += "| group | rows | mean \\|error\\| | max \\|error\\| | mean error |\n| --- | --- | --- | --- | --- |\n";
  for (const GroupSummary& g : summarize(rows))
    out += fmt::format("| {} | {} | {} | {} | {} |\n", g.group == "all" ? "**all**" : g.group, g.rows,
                       percent(g.mean_abs_error), percent(g.max_abs_error), percent(g.mean_error));
  out += "\n| row | published s | predicted s | error | predicted MFU | best candidate (of N) |\n"
         "| --- | --- | --- | --- | --- | --- |\n";
  for (const RowPrediction& r : rows) {
    if (!r.feasible) {
      out += fmt::format("| {} | {} | — | — | — | no feasible candidate: {} |\n", r.row->id,
                         fixed(r.row->published_iteration_s, 3), r.reason);
      continue;
    }
    out += fmt::format("| {} | {} | {} | {} | {} | `{}` ({}) |\n", r.row->id, fixed(r.row->published_iteration_s, 3),
                       fixed(r.predicted_s, 3), percent(r.error), percent(r.mfu), r.best, r.candidates);
  }
  return out;
}

}  // namespace twin
