// For tests of a GPU kernel profile's optional keys: a small profile to write and read, and the error a document
// loads with.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "cost/profile.hpp"
#include "tests/scratch_path.hpp"

namespace twin::test {

// The built-in profile's first two GPUs without their measured shapes and tables: small, so quick to write and read.
inline Profile small_profile() {
  Profile p = builtin_profile();
  p.builtin = false;
  p.gpus.resize(2);
  for (GpuKernelProfile& g : p.gpus) g.measured.clear();
  p.collectives.clear();
  return p;
}

// `document` written to a file and loaded: the InputError's message (its JSON path checked against `json_path`), or
// "" when it loads.
inline std::string profile_load_error(const nlohmann::json& document, const std::string& json_path) {
  const std::filesystem::path path = scratch_path("profile.json");
  std::ofstream(path) << document.dump();
  try {
    load_profile(path.string());
    return "";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), json_path) << e.what();
    return e.what();
  }
}

}  // namespace twin::test
