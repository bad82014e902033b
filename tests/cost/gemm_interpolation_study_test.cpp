// The interpolation study of docs/ACCURACY.md ("GEMM shapes nobody measured"), rerun by ctest: leave one shape
// out over every shipped profile's measured GEMMs, and the shapes `twin calibrate --check` measured apart from the
// profiles on real GPUs, priced from the profile they were checked against (fixtures/check-*-2026-11-28.csv are
// the check.csv files of docs/accuracy/2026-11-28-check-h100-x1.tar.gz and -check-h200-x1.tar.gz, times at the
// profile's reference clock; check-h200-x1-2026-11-29.csv the GEMM rows of check-all.md in
// docs/accuracy/2026-11-29-final-tree-calibrate-1xH200.tar.gz, the check of the calibration h200-x1 ships;
// check-h100-x1-2026-12-05.csv the GEMM rows of calibrate/check.csv in
// docs/accuracy/2026-12-05-blind-h100-calibrate-1xH100.tar.xz, the check of the calibration h100-x1 ships since
// then). A check is priced from the profile it checked: the h100-x1 of 2026-11-28's check is no longer shipped and
// stays as fixtures/h100-x1-shipped-2026-11-25.json (git show fd719e9:cost/profiles/h100-x1.json). Run
// `build-cpu/tests/test_cost --gtest_filter='GemmInterpolation*'` to print the tables. The limits sit a little above the figures of 2026-11-28 so that a predictor change that makes
// them worse fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/cluster.hpp"
#include "cost/gemm_interpolation_error.hpp"
#include "cost/profile.hpp"
#include "cost/shipped_profiles.hpp"

namespace twin {
namespace {

struct Summary {
  std::size_t shapes = 0;
  double mean_pct = 0, p90_pct = 0, max_pct = 0;
};

Summary summarise(const std::vector<GemmPredictionError>& errors) {
  std::vector<double> abs_pct;
  for (const GemmPredictionError& e : errors) abs_pct.push_back(std::abs(e.error_pct()));
  Summary s;
  s.shapes = abs_pct.size();
  if (abs_pct.empty()) return s;
  std::sort(abs_pct.begin(), abs_pct.end());
  for (double e : abs_pct) s.mean_pct += e / double(abs_pct.size());
  s.p90_pct = abs_pct[abs_pct.size() * 9 / 10];
  s.max_pct = abs_pct.back();
  return s;
}

std::string text(const Summary& s) {
  char line[96];
  std::snprintf(line, sizeof line, "%5zu | %5.2f%% | %5.2f%% | %5.1f%%", s.shapes, s.mean_pct, s.p90_pct, s.max_pct);
  return line;
}

template <class Keep>
std::vector<GemmPredictionError> only(const std::vector<GemmPredictionError>& errors, Keep keep) {
  std::vector<GemmPredictionError> kept;
  std::copy_if(errors.begin(), errors.end(), std::back_inserter(kept), keep);
  return kept;
}

// check.csv's rows: kind, shape "m=.. n=.. k=.. ta=.. tb=..", origin (quoted), ranks, size_B, measured_us
// (at the profile's reference clock), predicted_us, ... `printed_ns`, when given, receives the predicted_us
// column: what the check printed.
std::vector<MeasuredGemm> check_shapes(const std::string& fixture, std::vector<double>* printed_ns = nullptr) {
  std::ifstream in(std::string(TWIN_SOURCE_DIR) + "/tests/cost/fixtures/" + fixture);
  std::vector<MeasuredGemm> shapes;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) fields.emplace_back();
      else fields.back() += c;
    }
    GemmShape g;
    int ta = 0, tb = 0;
    long long m = 0, n = 0, k = 0;
    if (fields.size() < 7) continue;
    if (std::sscanf(fields[1].c_str(), "m=%lld n=%lld k=%lld ta=%d tb=%d", &m, &n, &k, &ta, &tb) != 5) continue;
    g.m = m, g.n = n, g.k = k, g.transpose_a = ta == 1, g.transpose_b = tb == 1;
    shapes.push_back({g, std::stod(fields[5]) * 1e3});
    if (printed_ns) printed_ns->push_back(std::stod(fields[6]) * 1e3);
  }
  return shapes;
}

struct Limits {
  double mean_pct, p90_pct;
};

TEST(GemmInterpolationStudy, LeaveOneShapeOutOnEveryShippedProfile) {
  std::printf("| profile | GEMMs | set | shapes | mean abs error | p90 | max |\n|---|---|---|---|---|---|---|\n");
  for (const ShippedProfile& shipped : shipped_profiles()) {
    const Profile profile = load_profile(std::string(shipped.name));
    const GpuKernelProfile& kernels = profile.gpus.front();
    const GpuSpec gpu = *gpu_preset(kernels.gpu);
    const auto errors = leave_one_gemm_out(kernels, gpu);
    const auto full = only(errors, [&](const auto& e) { return gemm_waves(e.shape, gpu.sm_count) >= 1; });
    const auto partial = only(errors, [&](const auto& e) { return gemm_waves(e.shape, gpu.sm_count) < 1; });
    const std::string name(shipped.name);
    const std::pair<const char*, const std::vector<GemmPredictionError>*> subsets[] = {
        {"all", &errors}, {"one wave or more", &full}, {"less than a wave", &partial}};
    for (const auto& [set, subset] : subsets)
      std::printf("| %s | %zu | %s | %s |\n", name.c_str(), errors.size(), set, text(summarise(*subset)).c_str());
    // 2026-11-28: h100-x1 2.51% mean, 5.86% p90 (1.70% / 3.71% at one wave or more); h200-x* 1.93% / 4.46%.
    const Limits limit = kernels.gpu == "H100-SXM-80GB" ? Limits{2.7, 6.2} : Limits{2.1, 4.8};
    EXPECT_LT(summarise(errors).mean_pct, limit.mean_pct) << name;
    EXPECT_LT(summarise(errors).p90_pct, limit.p90_pct) << name;
    EXPECT_LT(summarise(full).mean_pct, 1.9) << name;
  }
}

// The h100-x1 that `twin calibrate --check` of 2026-11-28 checked (shipped 2026-11-25 to 2026-12-05).
const std::string kH100ShippedOn2026_11_25 =
    std::string(TWIN_SOURCE_DIR) + "/tests/cost/fixtures/h100-x1-shipped-2026-11-25.json";

struct CheckSet {
  std::string profile;
  const char* fixture;
  std::size_t shapes;
  double mean_limit_pct, max_limit_pct;  // 2026-11-28 in the comments
};

TEST(GemmInterpolationStudy, ShapesTheChecksMeasuredApart) {
  const CheckSet sets[] = {
      {kH100ShippedOn2026_11_25, "check-h100-x1-2026-11-28.csv", 16, 1.6, 4.0},  // one H100, 08:14 UTC: 1.36%, 3.6%
      // The calibration shipped as h100-x1 since 2026-12-05, checked in the same call (17:09 UTC): 1.62%, 3.6%.
      {"h100-x1", "check-h100-x1-2026-12-05.csv", 17, 1.8, 4.0},
      // Checked against h200-x1 of 2026-11-25, whose kernels h200-x4 keeps (the times are at its reference clock).
      {"h200-x4", "check-h200-x1-2026-11-28.csv", 15, 1.5, 4.2},        // one H200, 09:56 UTC: 1.30%, 3.8%
      // The same H200, the shapes of tests/gpu/gemm_sweep.json: 1.61%, 12.5%.
      {"h200-x4", "check-sweep-h200-x1-2026-11-28.csv", 58, 1.8, 13.0},
      // The calibration shipped as h200-x1 since 2026-11-29, checked in the same call (02:47 UTC): 1.89%, 4.0%.
      {"h200-x1", "check-h200-x1-2026-11-29.csv", 17, 2.1, 4.4},
  };
  for (const CheckSet& set : sets) {
    const std::vector<MeasuredGemm> checked = check_shapes(set.fixture);
    ASSERT_EQ(checked.size(), set.shapes) << set.fixture;
    const Profile profile = load_profile(set.profile);
    const GpuKernelProfile& kernels = profile.gpus.front();
    const auto errors = held_out_gemm_errors(kernels, *gpu_preset(kernels.gpu), checked);
    std::printf("%s from %s\n| shape | measured us | predicted us | error |\n|---|---|---|---|\n", set.fixture,
                set.profile.c_str());
    for (const GemmPredictionError& e : errors)
      std::printf("| m=%lld n=%lld k=%lld | %.1f | %.1f | %+.2f%% |\n", (long long)e.shape.m, (long long)e.shape.n,
                  (long long)e.shape.k, e.measured_ns * 1e-3, e.predicted_ns * 1e-3, e.error_pct());
    const Summary s = summarise(errors);
    std::printf("%s: %s (shapes | mean | p90 | max)\n", set.fixture, text(s).c_str());
    EXPECT_LT(s.mean_pct, set.mean_limit_pct) << set.fixture;
    EXPECT_LT(s.max_pct, set.max_limit_pct) << set.fixture;
  }
}

// Why the check of 2026-11-28 said 3.4-16.3%: it priced with compute_time_ns, which multiplies the benchmark
// price by the in-situ ratio of the training steps folded into h100-x1 (28 traced GEMMs of Llama-2 7B that ran
// 1.11-1.18x their benchmark in training), and compared that with micro-benchmarks. This reproduces its column.
TEST(GemmInterpolationStudy, TheCheckOf2026_11_28PricedTrainingStepsNotBenchmarks) {
  std::vector<double> printed_ns;
  const std::vector<MeasuredGemm> checked = check_shapes("check-h100-x1-2026-11-28.csv", &printed_ns);
  const Profile profile = load_profile(kH100ShippedOn2026_11_25);
  const GpuKernelProfile& kernels = profile.gpus.front();
  const GpuSpec gpu = *gpu_preset(kernels.gpu);
  ASSERT_FALSE(kernels.trace_shapes.empty());
  for (std::size_t i = 0; i < checked.size(); ++i) {
    Op op;
    op.kind = OpKind::gemm;
    op.gemm = checked[i].shape;
    const double in_training_ns = double(compute_time_ns(profile, gpu, op)) - kernels.launch_overhead_ns;
    EXPECT_NEAR(in_training_ns / printed_ns[i], 1, 0.001) << i;
    EXPECT_GT(in_training_ns / benchmark_kernel_time_ns(kernels, gpu, op), 1.05) << i;
  }
}

}  // namespace
}  // namespace twin
