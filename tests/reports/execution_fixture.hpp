// The recorded runs of tests/traces/fixtures/executed (H200, 2026-11-21) and writable copies of them,
// for the tests of `twin report`'s numbers, page and error messages.
#pragma once
#include <filesystem>
#include <string>

#include "tests/cli/run_twin.hpp"

namespace twin::testing {

inline std::filesystem::path executed_fixture(const std::string& name) {
  return std::filesystem::path(TWIN_SOURCE_DIR) / "tests" / "traces" / "fixtures" / "executed" / name;
}

// A writable copy of a fixture folder under `dir` (the checked-in files may be read-only).
inline std::filesystem::path copy_fixture(const std::string& name, const std::filesystem::path& dir) {
  const std::filesystem::path copy = dir / name;
  std::filesystem::create_directories(dir);
  std::filesystem::copy(executed_fixture(name), copy, std::filesystem::copy_options::recursive);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(copy))
    std::filesystem::permissions(entry.path(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  return copy;
}

}  // namespace twin::testing
