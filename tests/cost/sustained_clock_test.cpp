// The sustained-clock curve (cost/sustained_clock.hpp): read at a duty, and in profile files with JSON-path errors.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "cost/sustained_clock.hpp"

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

namespace fs = std::filesystem;

// Writes `document` and expects load_profile to fail at `json_path` with `expected` in its message.
void expect_clock_load_error(const nlohmann::json& document, const std::string& json_path,
                             const std::string& expected) {
  const fs::path path = fs::temp_directory_path() / "twin_test_sustained_clock.json";
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

}  // namespace
}  // namespace twin
