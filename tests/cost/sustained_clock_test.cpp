// The sustained-clock curves (cost/sustained_clock.hpp): read at a duty, combined for a step that mixes BF16 and FP8
// GEMMs, and in profile files with JSON-path errors.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "cost/sustained_clock.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

SustainedClockCurve measured_curve() {
  return {{{0.4, 1620, {1610, 1630}, 640}, {0.6, 1560, {1550, 1570}, 620}, {1.0, 1460, {1450, 1470}, 590}}};
}

TEST(SustainedClock, LinearBetweenPointsFlatBeyondThem) {
  const SustainedClockCurve curve = measured_curve();
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 0.4), 1620);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 0.5), 1590);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 0.8), 1510);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 1.0), 1460);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 0.1), 1620);  // below the lightest load measured: its clock
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 0), 1620);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at({{{0.7, 1500, {}, 0}}}, 0.2), 1500);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at({}, 0.5), 0);  // not measured
}

TEST(SustainedClock, TheGemmClockIsReadLikeTheProbesAndFallsBackToThem) {
  SustainedClockCurve curve = measured_curve();
  EXPECT_DOUBLE_EQ(gemm_clock_MHz_at(curve, 0.5), 1590);  // none recorded: the probe's
  curve.points[0].gemm_clock_MHz = 1600;
  curve.points[1].gemm_clock_MHz = 1500;
  EXPECT_DOUBLE_EQ(gemm_clock_MHz_at(curve, 0.5), 1550);
  EXPECT_DOUBLE_EQ(sustained_clock_MHz_at(curve, 0.5), 1590);  // the probe's unchanged
  EXPECT_DOUBLE_EQ(gemm_clock_MHz_at(curve, 0.8), (1500 + 1460) / 2.0);  // the last point: its probe's
}

// Two curves whose probes read 1,600 (BF16) and 1,500 MHz (FP8) at duty 0.5; the FP8 GEMMs' cycles told 1,350, which
// is recorded and not priced.
TEST(SustainedClock, AStepMixingBf16AndFp8GemmsHoldsOneClockTheMixOfTheCurves) {
  const SustainedClockCurve bf16{{{0.5, 1600, {}, 700, 1750}}};
  const SustainedClockCurve fp8{{{0.5, 1500, {}, 1200, 1350}}};
  EXPECT_EQ(step_clock_at(bf16, {}, 0.5, 0.7), StepClock{1600});  // no FP8 curve: as before
  EXPECT_EQ(step_clock_at({}, fp8, 0.5, 1), StepClock{});           // no BF16 curve: the profile's own
  EXPECT_EQ(step_clock_at(bf16, fp8, 0.5, 1), StepClock{1500});     // all FP8: the FP8 curve's clock
  EXPECT_EQ(step_clock_at(bf16, fp8, 0.5, 0), StepClock{1600});
  EXPECT_DOUBLE_EQ(step_clock_at(bf16, fp8, 0.5, 0.25).sm_MHz, 1575);
}

namespace fs = std::filesystem;

// Writes `document` and expects load_profile to fail at `json_path` with `expected` in its message.
void expect_clock_load_error(const nlohmann::json& document, const std::string& json_path,
                             const std::string& expected) {
  const fs::path path = test::scratch_path("profile.json");
  std::ofstream(path) << document.dump();
  try {
    load_profile(path.string());
    ADD_FAILURE() << "no error for " << json_path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), json_path) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(SustainedClock, RoundTripsInProfilesAndBadCurvesAreRefusedAtTheirPath) {
  Profile profile = builtin_profile();
  profile.gpus[0].sustained_clock = measured_curve();
  const nlohmann::json document = to_json(profile);
  EXPECT_EQ(profile_from_json(document, "p.json").gpus[0].sustained_clock, measured_curve());
  EXPECT_FALSE(to_json(builtin_profile())["gpus"][0].contains("sustained_clock"));  // none measured: no key

  nlohmann::json bad = document;
  bad["gpus"][0]["sustained_clock"]["points"][1]["gemm_duty"] = 0.4;
  expect_clock_load_error(bad, "/gpus/0/sustained_clock/points/1/gemm_duty", "expected duties in ascending order");
  bad = document;
  bad["gpus"][0]["sustained_clock"]["points"][0]["gemm_duty"] = 1.5;
  expect_clock_load_error(bad, "/gpus/0/sustained_clock/points/0/gemm_duty", "expected a GEMM duty in (0, 1]");
  bad = document;
  bad["gpus"][0]["sustained_clock"]["points"][2]["gpu_sm_clock_MHz"][1] = "hot";
  expect_clock_load_error(bad, "/gpus/0/sustained_clock/points/2/gpu_sm_clock_MHz/1", "expected an SM clock in MHz");
  bad = document;
  bad["gpus"][0]["sustained_clock"]["points"] = nlohmann::json::array();
  expect_clock_load_error(bad, "/gpus/0/sustained_clock/points", "expected a non-empty array");
  bad = document;
  bad["gpus"][0]["sustained_clock"]["duty"] = 1;
  expect_clock_load_error(bad, "/gpus/0/sustained_clock/duty", "");
}

TEST(SustainedClock, TheFp8CurveAndGemmClocksRoundTripAndAreRefusedAtTheirPath) {
  Profile profile = builtin_profile();
  SustainedClockCurve fp8 = measured_curve();
  fp8.points[1].gemm_clock_MHz = 1400;
  fp8.points[2].nvml_sm_clock_MHz = 1395;
  profile.gpus[0].sustained_clock = measured_curve();
  profile.gpus[0].sustained_clock_fp8 = fp8;
  const nlohmann::json document = to_json(profile);
  EXPECT_EQ(document["gpus"][0]["sustained_clock_fp8"]["points"][1]["gemm_clock_MHz"], 1400);
  EXPECT_FALSE(document["gpus"][0]["sustained_clock_fp8"]["points"][0].contains("gemm_clock_MHz"));
  EXPECT_EQ(document["gpus"][0]["sustained_clock_fp8"]["points"][2]["nvml_sm_clock_MHz"], 1395);
  EXPECT_FALSE(document["gpus"][0]["sustained_clock_fp8"]["points"][0].contains("nvml_sm_clock_MHz"));
  const Profile read = profile_from_json(document, "p.json");
  EXPECT_EQ(read.gpus[0].sustained_clock_fp8, fp8);
  EXPECT_EQ(read.gpus[0].sustained_clock, measured_curve());
  Profile without_fp8_curve = builtin_profile();
  without_fp8_curve.gpus[0].sustained_clock_fp8 = {};
  EXPECT_FALSE(to_json(without_fp8_curve)["gpus"][0].contains("sustained_clock_fp8"));  // absent: not written

  nlohmann::json bad = document;
  bad["gpus"][0]["sustained_clock_fp8"]["points"][1]["gemm_clock_MHz"] = 0;
  expect_clock_load_error(bad, "/gpus/0/sustained_clock_fp8/points/1/gemm_clock_MHz", "expected an SM clock in MHz");
  bad = document;
  bad["gpus"][0]["sustained_clock_fp8"]["points"][2]["nvml_sm_clock_MHz"] = -3;
  expect_clock_load_error(bad, "/gpus/0/sustained_clock_fp8/points/2/nvml_sm_clock_MHz", "expected an SM clock in MHz");
  bad = document;
  bad["gpus"][0]["sustained_clock_fp8"]["points"][2]["gemm_duty"] = 0.5;
  expect_clock_load_error(bad, "/gpus/0/sustained_clock_fp8/points/2/gemm_duty", "expected duties in ascending order");
  bad = document;
  bad["gpus"][0]["sustained_clock_fp8"] = {{"points", 3}};
  expect_clock_load_error(bad, "/gpus/0/sustained_clock_fp8/points", "");
}

}  // namespace
}  // namespace twin
