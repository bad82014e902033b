// Runs the built `twin` binary and captures what it printed, for end-to-end tests.
#pragma once
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <gtest/gtest.h>

namespace twin::test {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `prefix` runs before the binary (e.g. "timeout -s INT 1").
inline Outcome run_twin_under(const std::string& prefix, const std::string& arguments) {
  std::string command = prefix + " " + std::string(TWIN_BINARY) + " " + arguments + " 2>&1";
  Outcome outcome;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return outcome;
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) outcome.output.append(buffer, n);
  int status = pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

inline Outcome run_twin(const std::string& arguments) { return run_twin_under("", arguments); }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh folder under the system temp dir, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name) {
    path = std::filesystem::temp_directory_path() / ("twin-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// A refused input: exit 1 and one "[error] " line under `max_bytes`, its control bytes escaped.
inline void expect_one_clean_error_line(const Outcome& run, std::size_t max_bytes, const std::filesystem::path& input) {
  EXPECT_EQ(run.exit_code, 1) << input << run.output.substr(0, 500);
  EXPECT_LT(run.output.size(), max_bytes) << input;
  EXPECT_TRUE(run.output.starts_with("[error] ")) << run.output.substr(0, 500);
  EXPECT_EQ(run.output.find('\n'), run.output.size() - 1) << "one line: " << run.output.substr(0, 500);
  EXPECT_TRUE(std::none_of(run.output.begin(), run.output.end() - 1,
                           [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      << input << ": " << run.output.substr(0, 500);
}

}  // namespace twin::test
