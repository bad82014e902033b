// The zero of a fold's mean signed error, on the line each row's two samples give.
#include "validation/folds.hpp"

#include <algorithm>

namespace twin {

ParameterFit fit_parameter(const std::vector<SampledRow>& rows, const SampledValues& samples, int parameter,
                           const std::string& held_out) {
  // The mean signed error at each sampled value, over the rows fitted on.
  std::array<double, 2> mean_error{};
  int fitted_on = 0;
  for (const SampledRow& row : rows) {
    if (row.parameter != parameter || row.group == held_out) continue;
    if (row.predicted_s[0] <= 0 || row.predicted_s[1] <= 0) continue;  // infeasible at a sample
    for (int i = 0; i < 2; ++i) mean_error[i] += row.predicted_s[i] / row.published_s - 1;
    ++fitted_on;
  }
  if (fitted_on == 0)
    return {std::nullopt, held_out.empty() ? "no feasible row to fit on" : "no other group's rows to fit on"};
  for (double& e : mean_error) e /= fitted_on;
  if (mean_error[0] == mean_error[1]) return {std::nullopt, "the predictions do not move with the value"};
  const auto [value_0, value_1] = samples.at(parameter);
  const double value = value_0 - mean_error[0] * (value_1 - value_0) / (mean_error[1] - mean_error[0]);
  if (!(value > 0)) return {std::nullopt, "the fitted value is not positive"};
  return {value, ""};
}

FoldFits fit_fold(const std::vector<SampledRow>& rows, const SampledValues& samples, const std::string& held_out) {
  FoldFits fold{held_out, {}};
  for (int p = 0; p < static_cast<int>(samples.size()); ++p)
    fold.fits.push_back(fit_parameter(rows, samples, p, held_out));
  return fold;
}

std::vector<std::string> groups_in_order(const std::vector<SampledRow>& rows) {
  std::vector<std::string> groups;
  for (const SampledRow& row : rows)
    if (std::find(groups.begin(), groups.end(), row.group) == groups.end()) groups.push_back(row.group);
  return groups;
}

}  // namespace twin
