// The fold logic of leave-one-group-out fitting on a small synthetic table (rows whose time is a line in the
// value, so every fit is known exactly), and the claim it rests on, checked on published rows: a row's
// predicted time rises smoothly with the in-training factor of its GPUs.
#include <gtest/gtest.h>

#include "cost/fitted_parameters.hpp"
#include "validation/folds.hpp"
#include "validation/validation_run.hpp"

namespace twin {
namespace {

// A row of parameter `p` whose predicted time is `slope` x value (published 1 s), sampled at 1 and 2.
SampledRow line(const std::string& group, int p, double slope) { return {group, p, 1.0, {slope * 1, slope * 2}}; }

const SampledValues kSamples = {{1, 2}, {1, 2}};

TEST(Folds, EachGroupIsFittedWithoutItsOwnRows) {
  // Parameter 0 prices groups a (0.8 x value), b (0.5 x value) and c (1.0 x value); parameter 1 only group d.
  const std::vector<SampledRow> rows = {line("a", 0, 0.8), line("b", 0, 0.5), line("c", 0, 1.0), line("d", 1, 0.25),
                                        line("d", 1, 0.25)};
  EXPECT_EQ(groups_in_order(rows), (std::vector<std::string>{"a", "b", "c", "d"}));
  // Without a: b and c, mean error (0.5 + 1.0) / 2 x value - 1 = 0 at 4/3.
  EXPECT_NEAR(*fit_parameter(rows, kSamples, 0, "a").value, 4.0 / 3, 1e-12);
  EXPECT_NEAR(*fit_parameter(rows, kSamples, 0, "b").value, 2 / 1.8, 1e-12);
  EXPECT_NEAR(*fit_parameter(rows, kSamples, 0, "c").value, 2 / 1.3, 1e-12);
  EXPECT_NEAR(*fit_parameter(rows, kSamples, 0, "").value, 3 / 2.3, 1e-12);  // in-sample: every row
  // Parameter 1 has no other group than d: benchmark prices when d is left out, and said so.
  const FoldFits without_d = fit_fold(rows, kSamples, "d");
  ASSERT_EQ(without_d.fits.size(), 2u);
  EXPECT_NEAR(*without_d.fits[0].value, 3 / 2.3, 1e-12);
  EXPECT_FALSE(without_d.fits[1].value.has_value());
  EXPECT_EQ(without_d.fits[1].no_fit_reason, "no other group's rows to fit on");
  EXPECT_NEAR(*fit_fold(rows, kSamples, "a").fits[1].value, 4.0, 1e-12);
}

TEST(Folds, RowsOfNoParameterOrInfeasibleAtASampleAreNotFittedOn) {
  std::vector<SampledRow> rows = {line("a", 0, 0.5), line("b", 0, 0.5), line("b", -1, 9.0)};
  rows.push_back({"b", 0, 1.0, {0.0, 3.0}});  // infeasible at the first sample
  EXPECT_NEAR(*fit_parameter(rows, kSamples, 0, "a").value, 2.0, 1e-12);
  // Samples that are not at 1 and 2, and a row that is not proportional to the value (a part that does not
  // scale with it): 1.5 s at 1.2, 1.9 s at 1.6, one second per unit, so the published 2 s at 1.7.
  const std::vector<SampledRow> affine = {{"a", 0, 2.0, {1.5, 1.9}}};
  const SampledValues samples = {{1.2, 1.6}};
  EXPECT_NEAR(*fit_parameter(affine, samples, 0, "").value, 1.7, 1e-12);
}

TEST(Folds, NoFitWhenThePredictionsDoNotMoveOrTheZeroIsNotPositive) {
  const std::vector<SampledRow> flat = {{"a", 0, 1.0, {0.8, 0.8}}};
  EXPECT_EQ(fit_parameter(flat, kSamples, 0, "").no_fit_reason, "the predictions do not move with the value");
  const std::vector<SampledRow> too_slow = {{"a", 0, 1.0, {3.0, 4.0}}};  // 2 + value s: 1 s at value -1
  EXPECT_EQ(fit_parameter(too_slow, kSamples, 0, "").no_fit_reason, "the fitted value is not positive");
  EXPECT_EQ(fit_parameter(flat, kSamples, 0, "a").no_fit_reason, "no other group's rows to fit on");
}

// The claim the folds rest on, on two groups of the published table (one per parameter, every row searched
// again at each value): predicted time rises with the factor, and at the middle of two values lies on the
// line through them within 0.5% of itself (a fit on the line lands within that of the zero it seeks).
TEST(Folds, APublishedRowsTimeRisesSmoothlyWithTheFactor) {
  const PublishedTable table = load_published_table(std::string(TWIN_SOURCE_DIR) + "/tests/validation/published.json");
  ValidationOptions options;
  options.groups = {"narayanan2021-table1", "megatron-readme-h100-2024"};
  std::vector<std::vector<RowPrediction>> at;
  for (double factor : {1.1, 1.25, 1.4}) {
    Profile profile = builtin_profile();
    for (const FittedParameter& p : builtin_fitted_parameters())
      profile = with_fitted_value(std::move(profile), p, factor);
    at.push_back(predict_table(table, profile, options));
  }
  ASSERT_EQ(at[0].size(), 19u);
  for (std::size_t i = 0; i < at[0].size(); ++i) {
    const double low = at[0][i].predicted_s, middle = at[1][i].predicted_s, high = at[2][i].predicted_s;
    EXPECT_LT(low, middle) << at[0][i].row->id;
    EXPECT_LT(middle, high) << at[0][i].row->id;
    EXPECT_NEAR((low + high) / 2, middle, 0.005 * middle) << at[0][i].row->id;
  }
}

}  // namespace
}  // namespace twin
