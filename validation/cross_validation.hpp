// `twin validate --cross-validate`: leave-one-group-out error of a table of published runs. Each group is
// predicted by the profile with every fitted parameter (cost/fitted_parameters.hpp) refitted on the rows of
// the other groups whose GPUs it prices (mean signed error zero); beside it, the in-sample error (every
// parameter fitted on all its rows) and the error at the parameters' built-in values.
//
// The work is four predictions of the table: at the built-in values and at a second value of every parameter
// (the samples the folds are fitted on, validation/folds.hpp), then each group exactly at its fold's values,
// then every row exactly at the in-sample values. Five where a parameter's in-sample fit lies outside its two
// samples: the table is predicted a third time at that fit, which replaces the sample farther from it before the
// folds and the in-sample values are fitted.
#pragma once
#include <string>
#include <vector>

#include "cost/fitted_parameters.hpp"
#include "validation/folds.hpp"
#include "validation/validation_run.hpp"

namespace twin {

struct CrossValidation {
  std::vector<FittedParameter> parameters;
  SampledValues samples;                    // per parameter: the two values the fits interpolate between
  std::vector<int> row_parameter;           // per table row: the parameter pricing its GPUs, -1 for none
  std::vector<FoldFits> folds;              // one per group, in table order
  FoldFits in_sample;                       // every group fitted
  std::vector<RowPrediction> held_out;      // every row, predicted with its group's fold
  std::vector<RowPrediction> fitted;        // every row at the in-sample values
  std::vector<RowPrediction> at_builtin;    // every row at the built-in values (samples[p][0])
};

// Every row of `table` (options.groups must be empty). Throws InputError naming a row whose GPUs more than
// one parameter prices (the folds fit one parameter per row).
CrossValidation cross_validate(const PublishedTable& table, const Profile& profile,
                               const std::vector<FittedParameter>& parameters, const ValidationOptions& options);

// The fold of `group` (held_out == group).
const FoldFits& fold_of(const CrossValidation& cv, const std::string& group);
// True when `group` has a row priced by `parameter` (a fold's missing fit matters to that group only then).
bool group_uses(const CrossValidation& cv, const PublishedTable& table, const std::string& group, int parameter);

// validation.csv of a cross-validation: validation_csv's columns for the cross-validated prediction, then
// in_sample_iteration_s, in_sample_error and fold (each parameter's value in the row's fold).
std::string cross_validation_csv(const CrossValidation& cv);
// validation.md: the summary per group (cross-validated, in-sample, built-in values), the values per fold,
// every row.
std::string cross_validation_markdown(const CrossValidation& cv, const PublishedTable& table,
                                      const std::string& profile_name);

}  // namespace twin
