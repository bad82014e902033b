// A path under the system temp folder that belongs to the running test alone, removed when the test ends. ctest runs
// every test as its own process, in parallel, so two tests of one file that wrote one fixed name raced (CI stop 59:
// the two SustainedClock round trips read each other's profile).
#pragma once
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

namespace twin::test {

// Removes, at the end of each test, the scratch paths it was given.
class ScratchCleaner : public ::testing::EmptyTestEventListener {
 public:
  std::vector<std::filesystem::path> paths;
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::error_code ignored;  // a test may have removed its own file
    for (const std::filesystem::path& path : paths) std::filesystem::remove_all(path, ignored);
    paths.clear();
  }
};

// `<temp>/twin-<suite>.<test>-<pid>-<leaf>`; the test's name has '/' (parameterised tests) replaced by '_'.
inline std::filesystem::path scratch_path(const std::string& leaf) {
  static ScratchCleaner* const cleaner = [] {
    auto* listener = new ScratchCleaner;  // owned by gtest's listener list from here on
    ::testing::UnitTest::GetInstance()->listeners().Append(listener);
    return listener;
  }();
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string owner = info ? std::string(info->test_suite_name()) + "." + info->name() : "no-test";
  for (char& c : owner)
    if (c == '/') c = '_';
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("twin-" + owner + "-" + std::to_string(::getpid()) + "-" + leaf);
  cleaner->paths.push_back(path);
  return path;
}

}  // namespace twin::test
