// Leave one group out: the two sampled predictions of the table, the fits of every fold on them
// (validation/folds.hpp), and each group and the in-sample fit predicted exactly at their values.
#include "validation/cross_validation.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {

namespace {

using Values = std::vector<std::optional<double>>;

// The second sample of a parameter: one secant step from its built-in value towards the zero of the mean
// signed error of every row it prices (error ~ value / true value - 1), at least 2% away so that the line
// through the two samples is measured over a real difference.
constexpr double kSmallestSampleStep = 0.02;

int parameter_of(const PublishedTable& table, const PublishedRow& row, const std::vector<FittedParameter>& parameters) {
  int found = -1;
  for (const NodeGroup& nodes : row.scenario.cluster.node_groups)
    for (int p = 0; p < static_cast<int>(parameters.size()); ++p) {
      if (!applies_to(parameters[p], nodes.gpu.name) || p == found) continue;
      if (found >= 0)
        throw InputError(table.source, row.json_path + "/scenario/cluster",
                         fmt::format("GPUs that one fitted parameter prices (--cross-validate fits one per row), "
                                     "got {} and {}",
                                     parameters[found].name, parameters[p].name));
      found = p;
    }
  return found;
}

Profile with_values(Profile profile, const std::vector<FittedParameter>& parameters, const Values& values) {
  for (std::size_t p = 0; p < parameters.size(); ++p)
    profile = with_fitted_value(std::move(profile), parameters[p], values[p]);
  return profile;
}

Values values_of(const FoldFits& fold) {
  Values values;
  for (const ParameterFit& fit : fold.fits) values.push_back(fit.value);
  return values;
}

Values sample(const SampledValues& samples, int which) {
  Values values;
  for (const auto& pair : samples) values.push_back(pair[which]);
  return values;
}

double second_sample(double builtin, double mean_error) {
  double step = 1 / (1 + mean_error) - 1;
  if (std::abs(step) < kSmallestSampleStep) step = mean_error > 0 ? -kSmallestSampleStep : kSmallestSampleStep;
  return builtin * (1 + step);
}

// The mean signed error of the rows `parameter` prices, at their first sample (0 when none is feasible).
double mean_error_at_first_sample(const std::vector<SampledRow>& rows, int parameter) {
  double sum = 0;
  int n = 0;
  for (const SampledRow& row : rows)
    if (row.parameter == parameter && row.predicted_s[0] > 0) {
      sum += row.predicted_s[0] / row.published_s - 1;
      ++n;
    }
  return n ? sum / n : 0;
}

// `profile` describing every GPU of the table: a GPU it lacks is added here, scaled from another (where the
// options or the row ask for scaling; else the row's error), so that the fitted values reach it too.
Profile describing_every_gpu(Profile profile, const PublishedTable& table, const ValidationOptions& options) {
  for (const PublishedRow& row : table.rows)
    profile = profile_for_cluster(std::move(profile), row.scenario.cluster,
                                  options.scale_profile || row.scenario.profile_scaling, table.source,
                                  row.json_path + "/scenario");
  return profile;
}

// Every row's predicted time, 0 where infeasible.
std::vector<double> predicted_times(const std::vector<RowPrediction>& rows) {
  std::vector<double> times;
  for (const RowPrediction& r : rows) times.push_back(r.feasible ? r.predicted_s : 0);
  return times;
}

// Per parameter: its fit lies outside the interval of its two samples. The fit then extrapolates each row's line
// beyond where the row was predicted, and a row's time is a line only near its samples (communication does not
// scale with the factor, another candidate may become the best): 0.13% off zero in-sample on four A100 rows whose
// zero lay 12% below the nearer sample (tests/cli/validate_command_test.cpp).
std::vector<bool> fits_outside_samples(const FoldFits& fits, const SampledValues& samples) {
  std::vector<bool> outside;
  for (std::size_t p = 0; p < samples.size(); ++p) {
    const std::optional<double>& value = fits.fits[p].value;
    outside.push_back(value && (*value < std::min(samples[p][0], samples[p][1]) ||
                                *value > std::max(samples[p][0], samples[p][1])));
  }
  return outside;
}

// A third sample of each parameter `outside` marks, at its fit: it replaces the sample farther from it, for the
// parameter and every row it prices (`third`: every row's time at the fits).
void replace_farther_sample(std::vector<SampledRow>& rows, SampledValues& samples, const FoldFits& fits,
                            const std::vector<bool>& outside, const std::vector<double>& third) {
  for (std::size_t p = 0; p < samples.size(); ++p) {
    if (!outside[p]) continue;
    const double value = *fits.fits[p].value;
    const int farther = std::abs(samples[p][0] - value) > std::abs(samples[p][1] - value) ? 0 : 1;
    samples[p][farther] = value;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (rows[i].parameter == static_cast<int>(p)) rows[i].predicted_s[farther] = third[i];
  }
}

}  // namespace

CrossValidation cross_validate(const PublishedTable& table, const Profile& given,
                               const std::vector<FittedParameter>& parameters, const ValidationOptions& options) {
  if (!options.groups.empty()) throw std::logic_error("cross-validation predicts every group");
  const Profile profile = describing_every_gpu(given, table, options);
  CrossValidation cv;
  cv.parameters = parameters;
  for (const PublishedRow& row : table.rows) cv.row_parameter.push_back(parameter_of(table, row, parameters));
  const auto pass = [&](const std::string& what) {
    if (options.on_pass) options.on_pass(what);
  };

  pass("every row at the parameters' built-in values (sample 1)");
  Values builtin;
  for (const FittedParameter& p : parameters) builtin.push_back(p.value);
  cv.at_builtin = predict_table(table, with_values(profile, parameters, builtin), options);
  const std::vector<double> first = predicted_times(cv.at_builtin);
  std::vector<SampledRow> sampled;
  for (std::size_t i = 0; i < table.rows.size(); ++i)
    sampled.push_back({table.rows[i].group, cv.row_parameter[i], table.rows[i].published_iteration_s, {first[i], 0}});
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    const double mean_error = mean_error_at_first_sample(sampled, static_cast<int>(p));
    cv.samples.push_back({parameters[p].value, second_sample(parameters[p].value, mean_error)});
  }

  pass("every row at a second value of each parameter (sample 2)");
  const std::vector<double> second =
      predicted_times(predict_table(table, with_values(profile, parameters, sample(cv.samples, 1)), options));
  for (std::size_t i = 0; i < sampled.size(); ++i) sampled[i].predicted_s[1] = second[i];
  cv.in_sample = fit_fold(sampled, cv.samples, "");
  if (const std::vector<bool> outside = fits_outside_samples(cv.in_sample, cv.samples);
      std::find(outside.begin(), outside.end(), true) != outside.end()) {
    pass("every row at in-sample values outside the two samples (sample 3)");
    const std::vector<double> third =
        predicted_times(predict_table(table, with_values(profile, parameters, values_of(cv.in_sample)), options));
    replace_farther_sample(sampled, cv.samples, cv.in_sample, outside, third);
    cv.in_sample = fit_fold(sampled, cv.samples, "");
  }

  cv.held_out.resize(table.rows.size());
  for (const std::string& group : groups_in_order(sampled)) {
    cv.folds.push_back(fit_fold(sampled, cv.samples, group));
    pass(fmt::format("the rows of {} with the parameters fitted without them", group));
    ValidationOptions only = options;
    only.groups = {group};
    for (RowPrediction& r : predict_table(table, with_values(profile, parameters, values_of(cv.folds.back())), only))
      cv.held_out[static_cast<std::size_t>(r.row - table.rows.data())] = std::move(r);
  }

  pass("every row with the parameters fitted on every group (in-sample)");
  cv.fitted = predict_table(table, with_values(profile, parameters, values_of(cv.in_sample)), options);
  return cv;
}

const FoldFits& fold_of(const CrossValidation& cv, const std::string& group) {
  const auto fold =
      std::find_if(cv.folds.begin(), cv.folds.end(), [&](const FoldFits& f) { return f.held_out == group; });
  if (fold == cv.folds.end()) throw std::logic_error("no fold holds out " + group);
  return *fold;
}

bool group_uses(const CrossValidation& cv, const PublishedTable& table, const std::string& group, int parameter) {
  for (std::size_t i = 0; i < table.rows.size(); ++i)
    if (table.rows[i].group == group && cv.row_parameter[i] == parameter) return true;
  return false;
}

}  // namespace twin
