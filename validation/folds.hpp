// Fitting a table's fitted parameters fold by fold (leave one group out) from each row's predictions at two
// values of the parameter that prices its GPUs. A row's predicted time is a smooth, monotone function of that
// parameter (tests/validation/folds_test.cpp checks it on published rows), taken here as the line through its
// two samples; a fit's mean signed error is then a line in the value too, and the fit is its zero.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace twin {

// A row as the fits see it.
struct SampledRow {
  std::string group;
  int parameter = -1;                  // index of the parameter pricing its GPUs; -1: none does
  double published_s = 0;
  std::array<double, 2> predicted_s{}; // at that parameter's two sampled values; 0: infeasible there
};

// Per parameter: the two values every row was predicted at (different).
using SampledValues = std::vector<std::array<double, 2>>;

// One parameter's fit: its value, or none (benchmark prices, factor 1) with the reason.
struct ParameterFit {
  std::optional<double> value;
  std::string no_fit_reason;  // when no value: "no other group's rows to fit on", ...
};

// The fits of every parameter without one group (empty held_out: on every group, in-sample).
struct FoldFits {
  std::string held_out;
  std::vector<ParameterFit> fits;  // per parameter
};

// `parameter` fitted on the rows it prices outside group `held_out` (empty: on all of them): the value at
// which their mean predicted / published - 1 is zero. No value when no such row is feasible at both samples,
// when the mean does not move with the value, or when its zero is not positive.
ParameterFit fit_parameter(const std::vector<SampledRow>& rows, const SampledValues& samples, int parameter,
                           const std::string& held_out);
// Every parameter fitted without `held_out` (empty: on every row).
FoldFits fit_fold(const std::vector<SampledRow>& rows, const SampledValues& samples, const std::string& held_out);
// The groups in order of first appearance.
std::vector<std::string> groups_in_order(const std::vector<SampledRow>& rows);

}  // namespace twin
