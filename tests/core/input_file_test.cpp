// Reading the user's files (core/input_file.hpp): only regular files within a size limit, and JSON whose
// duplicate keys, absurd nesting and out-of-range numbers are named by their path.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_reader.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

struct InputFolder {
  fs::path path = fs::temp_directory_path() / ("twin-input-file-" + std::to_string(::getpid()));
  InputFolder() { fs::create_directories(path); }
  ~InputFolder() { fs::remove_all(path); }
};

std::string read_error_of(const std::function<void()>& read) {
  try {
    read();
  } catch (const InputError& e) {
    return e.json_path() + " | " + e.what();
  }
  return "no error";
}

TEST(InputFile, ReadsARegularFile) {
  InputFolder folder;
  std::ofstream(folder.path / "a.json") << "{\"a\": 1}";
  EXPECT_EQ(read_input_file(folder.path / "a.json", "a test file"), "{\"a\": 1}");
}

TEST(InputFile, RefusesWhatIsNotARegularFileInsteadOfBlocking) {
  InputFolder folder;
  const fs::path fifo = folder.path / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<fs::path, std::string>> kinds = {
      {fifo, "is a FIFO"}, {fs::path("/dev/zero"), "is a character device"}, {folder.path, "is a folder"}};
  for (const auto& [path, kind] : kinds)
    EXPECT_NE(read_error_of([&] {
                read_input_file(path, "a scenario JSON");
              }).find(kind + ", not a regular file (expected a scenario JSON)"),
              std::string::npos)
        << path;
  EXPECT_NE(
      read_error_of([&] { read_input_file(folder.path / "missing", "a scenario JSON"); }).find("cannot open the file"),
      std::string::npos);
}

TEST(InputFile, RefusesAFileOverTheLimit) {
  InputFolder folder;
  std::ofstream(folder.path / "big") << std::string(2000, 'x');
  const std::string message = read_error_of([&] { read_input_file(folder.path / "big", "a profile", 1000); });
  EXPECT_NE(message.find("is 2000 bytes, more than the limit of 1000"), std::string::npos) << message;
  EXPECT_EQ(read_input_file(folder.path / "big", "a profile", 2000).size(), 2000u);
}

TEST(InputJson, DuplicateKeysAreErrorsAtTheirPath) {
  EXPECT_EQ(read_error_of([] { parse_input_json(R"({"a": {"b": [1, {"c": 1, "c": 2}]}})", "f.json"); }),
            "/a/b/1/c | f.json: at /a/b/1/c: expected each key once in an object, got 'c' twice");
  EXPECT_EQ(read_error_of([] { parse_input_json(R"({"a": 1, "b": {"a": 1}})", "f.json"); }), "no error");
}

TEST(InputJson, NumbersBeyondADoubleAreNamed) {
  EXPECT_EQ(read_error_of([] { parse_input_json(R"({"x": [0, 2, -1e400]})", "f.json"); }),
            "/x/2 | f.json: at /x/2: expected a number within the range of a double, got -1e400");
}

TEST(InputJson, NestingIsBounded) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(read_error_of([&] { parse_input_json(deep, "f.json"); }).find("nesting deeper than 256 levels"),
            std::string::npos);
  EXPECT_EQ(read_error_of([] { parse_input_json(std::string(200, '[') + std::string(200, ']'), "f.json"); }),
            "no error");
}

TEST(InputJson, MalformedJsonGivesTheByte) {
  EXPECT_NE(read_error_of([] { parse_input_json("{\"a\": }", "f.json"); }).find("f.json: malformed JSON (byte 7)"),
            std::string::npos);
}

TEST(InputError, HugeKeysAndValuesAreCutInMessages) {
  const std::string key(10'000'000, 'k');
  const nlohmann::json document = parse_input_json("{\"" + key + "\": 1}", "f.json");
  const std::string message = read_error_of([&] { JsonReader(document, "f.json").only_keys({"model", "training"}); });
  EXPECT_LT(message.size(), 1000u);
  EXPECT_NE(message.find("unknown key 'kkkk"), std::string::npos) << message.substr(0, 300);
  EXPECT_LT(InputError("f.json", "/" + key, key).json_path().size(), 300u);
  EXPECT_LT(std::string(InputError("f.json", "", key).what()).size(), 1200u);
}

}  // namespace
}  // namespace twin
