// Predicting a table of published runs (`twin validate`): each row's scenario is searched (what its source
// leaves open) with one profile, the best candidate is the prediction, and the error is predicted over
// published iteration time, minus 1 (negative: twin predicts too fast). Per group and over the whole table:
// mean and largest absolute error. Also the fitting of an in-situ prior on chosen groups (honest fitting:
// docs/VALIDATION.md).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cost/profile.hpp"
#include "sim/result.hpp"
#include "validation/published_table.hpp"

namespace twin {

struct RowPrediction {
  const PublishedRow* row = nullptr;
  int candidates = 0;          // the row's search space (valid or not)
  int simulated = 0;           // candidates simulated (valid and fitting in memory)
  bool feasible = false;
  std::string reason;          // when no candidate is feasible: the first one's reason
  std::string best;            // the best candidate's strategy key
  double predicted_s = 0;
  double error = 0;            // predicted / published - 1
  double mfu = 0;              // predicted, twin's formula (Megatron's, causal attention halved)
  TimeBreakdown breakdown;     // of the best candidate's critical class
  double seconds = 0;          // wall time of the row's search
};

struct GroupSummary {
  std::string group;           // "all" for the whole table
  int rows = 0;                // feasible rows counted
  double mean_abs_error = 0;
  double max_abs_error = 0;
  double mean_error = 0;       // signed: the bias
};

struct ValidationOptions {
  int jobs = 0;                            // threads per row's search (0: all cores)
  std::vector<std::string> groups;         // empty: every row
  bool scale_profile = false;              // GPUs the profile does not describe: scaled (else an error)
  bool full_replay = false;                // replay every iteration whole (strategies/steady_state.hpp)
  std::function<void(const RowPrediction&)> on_row;  // after each row, e.g. to print it
  std::function<void(const std::string&)> on_pass;   // cross-validation: before each pass over the table
};

// The rows of the chosen groups, in table order, each predicted with `profile`.
std::vector<RowPrediction> predict_table(const PublishedTable& table, const Profile& profile,
                                         const ValidationOptions& options = {});
// One summary per group (table order of first appearance), then "all".
std::vector<GroupSummary> summarize(const std::vector<RowPrediction>& rows);

// The factor f of the in-situ prior (the same for GEMMs, attention and memory-bound kernels) of the kernel
// profiles `gpus` names (a GPU name, or a family as cost/profile.hpp gpu_family gives it) that makes
// the mean signed error of the groups in `options.groups` zero: secant steps on f from 1, each predicting
// those groups again.
struct PriorFit {
  double factor = 1;
  std::vector<std::pair<double, double>> steps;  // (factor, mean signed error) tried, in order
};
PriorFit fit_in_situ_prior(const PublishedTable& table, const Profile& profile, const std::string& gpus,
                           const ValidationOptions& options);
// `profile` with the prior of every kernel profile `gpus` names set to `factor`; throws InputError when it
// names none.
Profile with_in_situ_prior(Profile profile, const std::string& gpus, double factor);

// validation.csv: one line per row (id, group, published and predicted time, error, best strategy, ...); the
// same bytes for the same table and profile (the search's wall time is printed, not written).
std::string validation_csv(const std::vector<RowPrediction>& rows);
// validation.csv's header and one row's line, without their line breaks.
std::string validation_csv_header();
std::string validation_csv_line(const RowPrediction& row);
// A fraction as validation.md writes it: "-3.2%".
std::string percent(double fraction);
// validation.md: the per-group summary and every row, for docs/VALIDATION.md.
std::string validation_markdown(const std::vector<RowPrediction>& rows, const std::string& profile_name);

}  // namespace twin
