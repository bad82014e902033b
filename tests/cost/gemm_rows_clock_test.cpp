// cost/gemm_rows_clock.hpp: the factor on the curve's clock by a step's GEMM rows, and the optional
// "gemm_rows_clock" key of a GPU's kernel profile: read, written back, refused at its JSON path.
#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cost/gemm_rows_clock.hpp"
#include "cost/profile.hpp"
#include "tests/cost/profile_key_test_util.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

TEST(GemmRowsClock, HalvingTheRowsRaisesTheClockByTwoToTheExponent) {
  const GemmRowsClock model{0.02, 8192, "runs"};
  EXPECT_DOUBLE_EQ(gemm_rows_clock_factor(model, 8192), 1);  // the curve's clock as it is
  EXPECT_NEAR(gemm_rows_clock_factor(model, 4096), std::pow(2.0, 0.02), 1e-12);
  EXPECT_NEAR(gemm_rows_clock_factor(model, 32768), std::pow(4.0, -0.02), 1e-12);
  EXPECT_DOUBLE_EQ(gemm_rows_clock_factor(model, 0), 1);  // a step without GEMMs
  EXPECT_DOUBLE_EQ(gemm_rows_clock_factor(GemmRowsClock{}, 4096), 1);  // not in the profile
}

TEST(GemmRowsClockKey, RoundTripsAndIsAbsentWhereNotFitted) {
  Profile p = test::small_profile();
  EXPECT_FALSE(to_json(p)["gpus"][0].contains("gemm_rows_clock"));
  p.gpus[0].gemm_rows_clock = {0.0175, 8192, "one-H200 studies"};
  const fs::path path = test::scratch_path("gemm_rows_roundtrip.json");
  save_profile(p, path);
  const Profile loaded = load_profile(path.string());
  EXPECT_EQ(loaded.gpus[0].gemm_rows_clock, p.gpus[0].gemm_rows_clock);
  EXPECT_TRUE(loaded.gpus[0].gemm_rows_clock.enabled());
  fs::remove(path);
}

TEST(GemmRowsClockKey, BadValuesAreRefusedAtTheirPath) {
  Profile p = test::small_profile();
  p.gpus[0].gemm_rows_clock = {0.02, 8192, "runs"};
  nlohmann::json document = to_json(p);
  document["gpus"][0]["gemm_rows_clock"]["exponent"] = 0.5;
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/gemm_rows_clock/exponent")
                .find("expected an exponent in [0, 0.2]"),
            std::string::npos);
  document = to_json(p);
  document["gpus"][0]["gemm_rows_clock"]["reference_rows"] = 0;
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/gemm_rows_clock/reference_rows")
                .find("expected a number of rows"),
            std::string::npos);
  document = to_json(p);
  document["gpus"][0]["gemm_rows_clock"].erase("source");
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/gemm_rows_clock").find("source"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["gemm_rows_clock"]["slope"] = 0.1;
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/gemm_rows_clock/slope").find("slope"), std::string::npos);
}

}  // namespace
}  // namespace twin
