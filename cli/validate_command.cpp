// `twin validate`: predict a table of published training runs and write the errors (validation/).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cost/profile.hpp"
#include "cli/commands.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/output_folder.hpp"
#include "core/text_format.hpp"
#include "cost/fitted_parameters.hpp"
#include "validation/cross_validation.hpp"
#include "validation/validation_run.hpp"

namespace twin {

void add_validate_command(CLI::App& app, ValidateOptions& options) {
  CLI::App* sub = app.add_subcommand(
      "validate",
      "Predict every row of a table of published training runs (tests/validation/published.json) and\n"
      "write the error of each against its published iteration time, per group and overall:\n"
      "  validation.csv  one line per row: published and predicted time, error, best candidate, breakdown\n"
      "  validation.md   the summary per group and every row (docs/VALIDATION.md holds the latest)");
  sub->add_option("table", options.table, "Validation table JSON (format: docs/VALIDATION.md)")->required();
  sub->add_option("--profile", options.profile, "Profile for every row (default: builtin)")->capture_default_str();
  sub->add_option("--out", options.out, "Output folder (created if missing)")->capture_default_str();
  CLI::Option* group = sub->add_option("--group", options.groups, "Only the rows of this group (repeatable)");
  sub->add_option("--jobs", options.jobs, "Threads per row's search (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  sub->add_flag("--scale-profile", options.scale_profile,
                "Price a row's GPU the profile does not describe from another GPU's measurements, scaled");
  sub->add_flag("--full-replay", options.full_replay,
                "Replay every candidate's whole iteration (no steady-state extrapolation of long pipelines)");
  CLI::Option* fit = sub->add_option(
      "--fit-prior", options.fit_family,
      "Fit the in-situ prior of this GPU family (e.g. ampere) on the chosen groups, print it,\n"
      "and predict the whole table with it");
  // Every group is predicted in turn with the fitted parameters refitted without it: a chosen group or a
  // prior fitted beforehand would change what "without it" means, so they are refused.
  sub->add_flag("--cross-validate", options.cross_validate,
                "Leave one group out: predict each group with the built-in profile's fitted parameters\n"
                "(cost/fitted_parameters.hpp) refitted on the other groups' rows; beside it the in-sample\n"
                "error (fitted on every group) and the values of every fold (takes every group: no --group,\n"
                "no --fit-prior)")
      ->excludes(group)
      ->excludes(fit);
}

namespace {

void print_row(const RowPrediction& r) {
  if (r.feasible)
    std::printf("%-44s published %9.3f s  predicted %9.3f s  %+6.1f%%  (%d candidates, %.1f s)\n", r.row->id.c_str(),
                r.row->published_iteration_s, r.predicted_s, 100 * r.error, r.candidates, r.seconds);
  else
    std::printf("%-44s no feasible candidate: %s\n", r.row->id.c_str(), r.reason.c_str());
  std::fflush(stdout);
}

void print_summary(const std::string& title, const std::vector<RowPrediction>& rows) {
  if (!title.empty()) std::printf("%s\n", title.c_str());
  for (const GroupSummary& g : summarize(rows))
    std::printf("%-44s %2d rows  mean |error| %5.1f%%  max %5.1f%%  mean %+5.1f%%\n", g.group.c_str(), g.rows,
                100 * g.mean_abs_error, 100 * g.max_abs_error, 100 * g.mean_error);
}

int run_cross_validation(const ValidateOptions& options, const PublishedTable& table, const Profile& profile) {
  OutputFolder folder(options.out, {"validation.csv", "validation.md"});
  ValidationOptions run;
  run.jobs = options.jobs;
  run.full_replay = options.full_replay;
  run.scale_profile = options.scale_profile;
  run.on_row = print_row;
  run.on_pass = [](const std::string& pass) {
    std::printf("predicting %s\n", pass.c_str());
    std::fflush(stdout);
  };
  const CrossValidation cv = cross_validate(table, profile, builtin_fitted_parameters(), run);
  write_file_atomically(folder.staged("validation.csv"), cross_validation_csv(cv));
  write_file_atomically(folder.staged("validation.md"), cross_validation_markdown(cv, table, options.profile));
  folder.publish();
  for (const FoldFits& fold : cv.folds)
    for (std::size_t p = 0; p < cv.parameters.size(); ++p) {
      const ParameterFit& fit = fold.fits[p];
      if (fit.value)
        std::printf("without %-36s %s = %.4f\n", fold.held_out.c_str(), cv.parameters[p].name.c_str(), *fit.value);
      else if (group_uses(cv, table, fold.held_out, static_cast<int>(p)))
        std::printf("without %-36s %s: benchmark prices, factor 1 (%s)\n", fold.held_out.c_str(),
                    cv.parameters[p].name.c_str(), fit.no_fit_reason.c_str());
    }
  print_summary("in-sample (every parameter fitted on every group):", cv.fitted);
  print_summary("cross-validated (each group predicted with the parameters fitted without it):", cv.held_out);
  std::printf("wrote %s/{validation.csv,validation.md}\n", options.out.c_str());
  return 0;
}

}  // namespace

int run_validate(const ValidateOptions& options) {
  const PublishedTable table = load_published_table(options.table);
  if (options.cross_validate) return run_cross_validation(options, table, load_profile(options.profile));
  OutputFolder folder(options.out, {"validation.csv", "validation.md"});
  Profile profile = load_profile(options.profile);
  ValidationOptions run;
  run.jobs = options.jobs;
  run.groups = options.groups;
  run.full_replay = options.full_replay;
  for (const std::string& group : options.groups)
    if (std::none_of(table.rows.begin(), table.rows.end(), [&](const PublishedRow& r) { return r.group == group; }))
      throw InputError(options.table, "/rows", fmt::format("a row of group \"{}\" (--group)", group));
  if (!options.fit_family.empty()) {
    const PriorFit fit = fit_in_situ_prior(table, profile, options.fit_family, run);
    for (const auto& [factor, error] : fit.steps)
      std::printf("fit %s prior %.4f: mean error %+.2f%%\n", options.fit_family.c_str(), factor, 100 * error);
    std::printf("fitted %s in-situ prior: %.4f (groups:", options.fit_family.c_str(), fit.factor);
    for (const std::string& group : options.groups) std::printf(" %s", group.c_str());
    std::printf(")\n");
    profile = with_in_situ_prior(std::move(profile), options.fit_family, fit.factor);
    run.groups.clear();
  }
  run.on_row = print_row;
  run.scale_profile = options.scale_profile;
  const std::vector<RowPrediction> rows = predict_table(table, profile, run);
  write_file_atomically(folder.staged("validation.csv"), validation_csv(rows));
  write_file_atomically(folder.staged("validation.md"), validation_markdown(rows, options.profile));
  folder.publish();
  print_summary("", rows);
  std::printf("wrote %s/{validation.csv,validation.md}\n", options.out.c_str());
  return 0;
}

}  // namespace twin
