// Profiles measured by `twin calibrate` on real machines and shipped inside the binary
// (cost/profiles/*.json; docs/PROFILES.md says when and how each was measured).
#pragma once
#include <string_view>
#include <vector>

namespace twin {

struct ShippedProfile {
  std::string_view name;  // file name without .json, e.g. "h200-x4"
  std::string_view json;
};

const std::vector<ShippedProfile>& shipped_profiles();

}  // namespace twin
