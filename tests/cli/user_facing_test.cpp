// What a user meets first (issue 39's smaller items): `twin` alone prints the help, --version names the commit,
// NO_COLOR turns colour off, simulate --help says what the built-in profile is, traces come gzip-compressed on
// request, and the repository cites no file a clone lacks.
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <zlib.h>

#include "run_twin.hpp"
#include "small_scenario.hpp"

namespace twin::test {
namespace {

namespace fs = std::filesystem;

// Runs a shell command; stdout and stderr together.
Outcome run_shell(const std::string& command) {
  Outcome outcome;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return outcome;
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) outcome.output.append(buffer, n);
  const int status = pclose(pipe);
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

std::string gunzip(const std::string& compressed) {
  z_stream zlib{};
  EXPECT_EQ(inflateInit2(&zlib, 15 + 16), Z_OK);
  zlib.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zlib.avail_in = static_cast<uInt>(compressed.size());
  std::string text;
  char out[1 << 16];
  int status = Z_OK;
  while (status == Z_OK) {
    zlib.next_out = reinterpret_cast<Bytef*>(out);
    zlib.avail_out = sizeof out;
    status = inflate(&zlib, Z_NO_FLUSH);
    text.append(out, sizeof out - zlib.avail_out);
  }
  inflateEnd(&zlib);
  EXPECT_EQ(status, Z_STREAM_END);
  return text;
}

TEST(UserFacing, TwinAlonePrintsTheHelpAndSucceeds) {
  const Outcome bare = run_twin("");
  EXPECT_EQ(bare.exit_code, 0) << bare.output;
  for (const char* word : {"Usage", "simulate", "report", "validate", "calibrate", "--version"})
    EXPECT_NE(bare.output.find(word), std::string::npos) << word << "\n" << bare.output;
  EXPECT_EQ(bare.output.find("[error]"), std::string::npos);
}

TEST(UserFacing, VersionNamesTheCommitItWasBuiltFrom) {
  const Outcome version = run_twin("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(std::regex_match(version.output,
                               std::regex(R"(twin \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n)")))
      << version.output;
}

// cli/git_commit.cmake, which the build runs: the checkout's commit, "unknown" where there is no checkout.
TEST(UserFacing, TheCommitIsUnknownOutsideAGitCheckout) {
  TempDir dir("commit");
  fs::create_directories(dir.path / "source");
  const std::string script = std::string(TWIN_SOURCE_DIR) + "/cli/git_commit.cmake";
  const auto header_for = [&](const fs::path& source) {
    const fs::path out = dir.path / "twin_commit.hpp";
    fs::remove(out);
    const Outcome run =
        run_shell("cmake -DSOURCE=" + source.string() + " -DOUT=" + out.string() + " -P " + script);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return read_file(out);
  };
  EXPECT_NE(header_for(dir.path / "source").find("#define TWIN_GIT_COMMIT \"unknown\""), std::string::npos);
  const Outcome head = run_shell("git -C " + std::string(TWIN_SOURCE_DIR) + " rev-parse --short=12 HEAD");
  if (head.exit_code != 0) GTEST_SKIP() << "the source tree is no git checkout: " << head.output;
  EXPECT_NE(header_for(TWIN_SOURCE_DIR).find("#define TWIN_GIT_COMMIT \"" + head.output.substr(0, 12)),
            std::string::npos);
}

// no-color.org: NO_COLOR set and not empty turns colour off; on a terminal (script(1) gives one) twin colours
// "[error]" otherwise.
TEST(UserFacing, NoColorTurnsColourOffOnATerminal) {
  if (run_shell("command -v script").exit_code != 0) GTEST_SKIP() << "no script(1) to give twin a terminal";
  const auto on_terminal = [](const std::string& environment) {
    return run_shell("env " + environment + " script -qec '" + std::string(TWIN_BINARY) +
                     " simulate /nonexistent/s.json' /dev/null")
        .output;
  };
  const std::string coloured = on_terminal("-u NO_COLOR");
  ASSERT_NE(coloured.find("nonexistent"), std::string::npos) << coloured;
  EXPECT_NE(coloured.find("\x1b["), std::string::npos) << coloured;
  EXPECT_NE(on_terminal("NO_COLOR=").find("\x1b["), std::string::npos);  // empty: as if unset
  const std::string plain = on_terminal("NO_COLOR=1");
  EXPECT_NE(plain.find("[error]"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("\x1b["), std::string::npos) << plain;
}

TEST(UserFacing, SimulateHelpSaysWhatTheBuiltinProfileIs) {
  const Outcome help = run_twin("simulate --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.output.find("datasheet estimates"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("fitted on published runs"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--trace-format"), std::string::npos);
}

// The same run's trace, plain and compressed: the .json.gz holds the .json's bytes, the same bytes every run.
TEST(UserFacing, TracesCanBeWrittenGzipCompressed) {
  TempDir dir("gz");
  write_file(dir.path / "s.json", small_scenario().dump());
  const std::string simulate = "simulate " + (dir.path / "s.json").string() + " --quiet --top 1 --out ";
  ASSERT_EQ(run_twin(simulate + (dir.path / "plain").string()).exit_code, 0);
  ASSERT_EQ(run_twin(simulate + (dir.path / "gz").string() + " --trace-format json.gz").exit_code, 0);
  ASSERT_EQ(run_twin(simulate + (dir.path / "gz2").string() + " --trace-format json.gz").exit_code, 0);
  std::vector<fs::path> plain, compressed;
  for (const auto& entry : fs::directory_iterator(dir.path / "plain" / "traces")) plain.push_back(entry.path());
  for (const auto& entry : fs::directory_iterator(dir.path / "gz" / "traces")) compressed.push_back(entry.path());
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(compressed.size(), 1u);
  EXPECT_EQ(compressed[0].filename().string(), plain[0].filename().string() + ".gz");
  const std::string gz = read_file(compressed[0]);
  ASSERT_GT(gz.size(), 2u);
  EXPECT_EQ(gz.substr(0, 2), "\x1f\x8b");
  EXPECT_LT(gz.size() * 4, read_file(plain[0]).size());
  EXPECT_EQ(gunzip(gz), read_file(plain[0]));
  EXPECT_EQ(read_file(dir.path / "gz2" / "traces" / compressed[0].filename()), gz);
  EXPECT_EQ(run_twin(simulate + (dir.path / "x").string() + " --trace-format zip").exit_code, 2);
}

// A clone holds the repository only: what the code and docs cite must be inside it (docs/REFERENCES.md).
TEST(UserFacing, NothingCitesTheSharedReferenceFolder) {
  const Outcome git = run_shell("git -C " + std::string(TWIN_SOURCE_DIR) + " grep -n 'shared/reference' -- . ':!tests/cli/user_facing_test.cpp'");
  if (git.exit_code > 1) GTEST_SKIP() << "the source tree is no git checkout: " << git.output;
  EXPECT_EQ(git.output, "");  // git grep exits 1 when nothing matches
}

}  // namespace
}  // namespace twin::test
