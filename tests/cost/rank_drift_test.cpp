// The optional "rank_drift" key of a GPU's kernel profile: read, written back, and refused at its JSON path.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "tests/cost/profile_key_test_util.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

TEST(RankDriftKey, RoundTripsAndIsAbsentWhereNotMeasured) {
  Profile p = test::small_profile();
  EXPECT_FALSE(to_json(p)["gpus"][0].contains("rank_drift"));
  p.gpus[0].rank_drift = {101456, 0.004078, "runs of a study"};
  const nlohmann::json document = to_json(p);
  EXPECT_EQ(document["gpus"][0]["rank_drift"]["rate"], 0.004078);
  const fs::path path = test::scratch_path("roundtrip.json");
  save_profile(p, path);
  const Profile loaded = load_profile(path.string());
  EXPECT_EQ(loaded.gpus[0].rank_drift, p.gpus[0].rank_drift);
  EXPECT_TRUE(loaded.gpus[0].rank_drift.enabled());
  EXPECT_FALSE(loaded.gpus[1].rank_drift.enabled());
  fs::remove(path);
}

TEST(RankDriftKey, BadValuesAreRefusedAtTheirPath) {
  Profile p = test::small_profile();
  p.gpus[0].rank_drift = {1000, 0.01, "runs"};
  nlohmann::json document = to_json(p);
  document["gpus"][0]["rank_drift"]["rate"] = 2;
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/rank_drift/rate").find("expected a share in [0, 1]"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["rank_drift"]["fixed_ns"] = -5;
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/rank_drift/fixed_ns").find("expected a time in ns"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["rank_drift"].erase("source");
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/rank_drift").find("source"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["rank_drift"]["spread"] = 0.1;
  EXPECT_NE(test::profile_load_error(document, "/gpus/0/rank_drift/spread").find("spread"), std::string::npos);
}

}  // namespace
}  // namespace twin
