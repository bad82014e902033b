// Profiles measured by `twin calibrate` on real machines and shipped inside the binary
// (cost/profiles/*.json; docs/PROFILES.md says when and how each was measured).
#pragma once
#include <algorithm>
#include <string_view>
#include <vector>

namespace twin {

struct ShippedProfile {
  std::string_view name;  // file name without .json, e.g. "h200-x4"
  std::string_view json;
};

const std::vector<ShippedProfile>& shipped_profiles();

// True for "builtin" and a shipped profile's name: a profile that is not a file (a fold writes beside the run).
inline bool is_named_profile(std::string_view name) {
  return name == "builtin" || std::any_of(shipped_profiles().begin(), shipped_profiles().end(),
                                          [&](const ShippedProfile& p) { return p.name == name; });
}

}  // namespace twin
