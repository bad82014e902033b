// The measured profiles shipped in the binary pass the input checks a user's file gets (load_profile trusts
// them and skips that pass), read back into the same profile, name the GPU they were measured on, and hold
// what a calibration measures.
#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "cost/shipped_profiles.hpp"
#include "core/cluster.hpp"
#include "core/input_file.hpp"

namespace twin {
namespace {

TEST(ShippedProfiles, EveryOneLoadsAndDescribesItsMachine) {
  ASSERT_GE(shipped_profiles().size(), 4u);
  for (const ShippedProfile& shipped : shipped_profiles()) {
    Profile profile = load_profile(std::string(shipped.name));
    EXPECT_FALSE(profile.builtin) << shipped.name;
    ASSERT_EQ(profile.gpus.size(), 1u) << shipped.name;
    EXPECT_TRUE(gpu_preset(profile.gpus.front().gpu).has_value()) << profile.gpus.front().gpu;
    EXPECT_GT(profile.gpus.front().measured.size(), 1000u) << shipped.name;
    const int gpus = profile.provenance.at("gpu_count").get<int>();
    EXPECT_NE(std::string(shipped.name).find("-x" + std::to_string(gpus)), std::string::npos) << shipped.name;
    // Collective tables exist exactly when there were several GPUs to measure.
    EXPECT_EQ(profile.collectives.empty(), gpus == 1) << shipped.name;
  }
}

TEST(ShippedProfiles, PassTheInputChecks) {
  for (const ShippedProfile& shipped : shipped_profiles()) {
    const std::string source = std::string(shipped.name) + ".json";
    const Profile checked = profile_from_json(parse_input_json(shipped.json, source), source);
    EXPECT_EQ(to_json(checked), to_json(load_profile(std::string(shipped.name)))) << shipped.name;
  }
}

TEST(ShippedProfiles, AnUnknownNameListsTheShippedOnes) {
  try {
    load_profile("h900-x3");
    FAIL() << "expected an InputError";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("h200-x4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace twin
