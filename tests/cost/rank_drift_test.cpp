// The optional "rank_drift" key of a GPU's kernel profile: read, written back, and refused at its JSON path.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

// `document` written to a file and loaded: the InputError's JSON path and message, or "" when it loads.
// The built-in profile's first two GPUs without their measured shapes and tables: small, so quick to write and read.
Profile small_profile() {
  Profile p = builtin_profile();
  p.builtin = false;
  p.gpus.resize(2);
  for (GpuKernelProfile& g : p.gpus) g.measured.clear();
  p.collectives.clear();
  return p;
}

std::string load_error(const nlohmann::json& document, const std::string& json_path) {
  const fs::path path = test::scratch_path("profile.json");
  std::ofstream(path) << document.dump();
  try {
    load_profile(path.string());
    return "";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), json_path) << e.what();
    return e.what();
  }
}

TEST(RankDriftKey, RoundTripsAndIsAbsentWhereNotMeasured) {
  Profile p = small_profile();
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
  Profile p = small_profile();
  p.gpus[0].rank_drift = {1000, 0.01, "runs"};
  nlohmann::json document = to_json(p);
  document["gpus"][0]["rank_drift"]["rate"] = 2;
  EXPECT_NE(load_error(document, "/gpus/0/rank_drift/rate").find("expected a share in [0, 1]"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["rank_drift"]["fixed_ns"] = -5;
  EXPECT_NE(load_error(document, "/gpus/0/rank_drift/fixed_ns").find("expected a time in ns"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["rank_drift"].erase("source");
  EXPECT_NE(load_error(document, "/gpus/0/rank_drift").find("source"), std::string::npos);
  document = to_json(p);
  document["gpus"][0]["rank_drift"]["spread"] = 0.1;
  EXPECT_NE(load_error(document, "/gpus/0/rank_drift/spread").find("spread"), std::string::npos);
}

}  // namespace
}  // namespace twin
