// training.seq_length_histogram (inline, JSON file, CSV file) and search.hot_switch's preconditions: what
// parses, the round trip through to_json, and every error naming its file and place.
#include <filesystem>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "core/scenario_histogram.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

using nlohmann::json;

json histogram_scenario() {
  return json::parse(R"({
    "model": {"preset": "llama2-7b"},
    "training": {"seq_length": 8192, "global_batch_size": 64},
    "cluster": {"nodes": [{"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8}]}
  })");
}

std::filesystem::path temp_folder() {
  const auto folder = test::scratch_path("histogram");
  std::filesystem::create_directories(folder);
  return folder;
}

void write(const std::filesystem::path& path, const std::string& text) { std::ofstream(path) << text; }

InputError histogram_error_of(const json& document, const std::string& source) {
  try {
    parse_scenario(document, source);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << document.dump();
  return InputError("", "", "");
}

TEST(SeqLengthHistogram, InlinePairsParseAndRoundTrip) {
  json d = histogram_scenario();
  d["training"]["seq_length_histogram"] = json::parse("[[1024, 30], [4096, 5], [8192, 1]]");
  d["search"] = {{"hot_switch", true}};
  const Scenario s = parse_scenario(d, "scenario.json");
  const std::vector<SeqLengthCount> expected = {{1024, 30}, {4096, 5}, {8192, 1}};
  EXPECT_EQ(s.training.seq_length_histogram, expected);
  EXPECT_TRUE(s.search.hot_switch);
  EXPECT_EQ(parse_scenario(to_json(s), "again.json"), [&] {
    Scenario t = s;
    t.source = "again.json";
    return t;
  }());
}

TEST(SeqLengthHistogram, CsvAndJsonFilesRelativeToTheScenario) {
  const auto folder = temp_folder();
  write(folder / "lengths.csv", "length,count\n512,10\r\n2048,3\n\n8192,1\n");
  write(folder / "lengths.json", "[[512, 10], [2048, 3], [8192, 1]]");
  const std::vector<SeqLengthCount> expected = {{512, 10}, {2048, 3}, {8192, 1}};
  json d = histogram_scenario();
  for (const char* name : {"lengths.csv", "lengths.json"}) {
    d["training"]["seq_length_histogram"] = name;
    EXPECT_EQ(parse_scenario(d, (folder / "scenario.json").string()).training.seq_length_histogram, expected) << name;
  }
}

// A copy of the scenario shares the histogram (the hot-switching search copies it per phase and length range).
TEST(SeqLengthHistogram, CopiesShareOneHistogram) {
  json d = histogram_scenario();
  d["training"]["seq_length_histogram"] = json::parse("[[1024, 30], [4096, 5]]");
  const Scenario s = parse_scenario(d, "scenario.json");
  const Scenario copy = s;
  EXPECT_EQ(&copy.training.seq_length_histogram.bars(), &s.training.seq_length_histogram.bars());
  EXPECT_EQ(copy, s);
}

// Rows as `>>` read them: blanks around the numbers, a sign; anything else names the line.
TEST(SeqLengthHistogram, CsvRowsWithBlanksAndSigns) {
  const std::vector<SeqLengthCount> expected = {{512, 10}, {1024, 4}, {2048, 1}};
  EXPECT_EQ(parse_seq_length_histogram_csv("length,count\n 512 , 10\n+1024,\t4 \r\n\n2048,+1", "h.csv", 8192),
            expected);
  for (const char* row : {"512,10,3", "512;10", "1e3,1", "512,", ",5", "512 10", "+-512,1", "99999999999999999999,1",
                          "512,1x"}) {
    try {
      parse_seq_length_histogram_csv(std::string("256,1\n") + row + "\n", "h.csv", 8192);
      ADD_FAILURE() << "no error for " << row;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("line 2: expected \"length,count\" with two integers"), std::string::npos)
          << row << ": " << e.what();
    }
  }
}

// A JSON file is read pair by pair; each error names the pair's path within the file.
TEST(SeqLengthHistogram, JsonFileErrorsNameThePair) {
  const std::vector<SeqLengthCount> expected = {{512, 3}, {1024, 2}};
  EXPECT_EQ(parse_seq_length_histogram_json(" [[512, 3], [1024, 2]] ", "h.json", 8192), expected);
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"[[512, 3], [1024, 2.5]]", "/1/1", "expected an integer, got 2.5"},
      {"[[512, 3], [1024]]", "/1", "expected a [length, count] pair, got an array of 1"},
      {"[[512, 3, 4]]", "/0", "expected a [length, count] pair, got an array of more than 2"},
      {"[[512, 3], [256, 1]]", "/1/0", "expected a length above the previous entry's 512, got 256"},
      {"[[9000, 1]]", "/0/0", "expected a positive integer (at most 8192), got 9000"},
      {"[[512, 18446744073709551615]]", "/0/1", "expected an integer in [0, 1099511627776], got 18446744073709551615"},
      {"[[512, \"3\"]]", "/0/1", "expected an integer, got \"3\""},
      {"[{\"length\": 512}]", "/0", "expected a [length, count] pair, got an object"},
      {"[[[512]]]", "/0/0", "expected an integer, got an array"},
      {"{}", "", "expected [[length, count], ...], got an object"},
      {"[]", "", "expected a non-empty array"},
      {"[[512, 0]]", "", "expected counts with a positive sum"},
      {"[[512, 1]", "", "malformed JSON"}};
  for (const auto& [text, path, message] : cases) {
    try {
      parse_seq_length_histogram_json(text, "h.json", 8192);
      ADD_FAILURE() << "no error for " << text;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "h.json");
      EXPECT_EQ(e.json_path(), path) << text << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(SeqLengthHistogram, CsvErrorsNameTheLine) {
  try {
    parse_seq_length_histogram_csv("length,count\n512,10\n256,4\n", "h.csv", 8192);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "h.csv");
    EXPECT_NE(std::string(e.what()).find("line 3: expected a length above the previous entry's 512, got 256"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_seq_length_histogram_csv("512;10\n", "h.csv", 8192), InputError);
  EXPECT_THROW(parse_seq_length_histogram_csv("512,10,3\n", "h.csv", 8192), InputError);
  EXPECT_THROW(parse_seq_length_histogram_csv("9000,1\n", "h.csv", 8192), InputError);   // above seq_length
  EXPECT_THROW(parse_seq_length_histogram_csv("512,0\n", "h.csv", 8192), InputError);    // no sequences
}

TEST(SeqLengthHistogram, JsonErrorsNameFileAndPath) {
  json d = histogram_scenario();
  d["training"]["seq_length_histogram"] = json::parse("[[1024, 3], [1024, 2]]");
  InputError e = histogram_error_of(d, "scenario.json");
  EXPECT_EQ(e.json_path(), "/training/seq_length_histogram/1/0");
  EXPECT_NE(std::string(e.what()).find("above the previous entry's 1024"), std::string::npos) << e.what();

  d["training"]["seq_length_histogram"] = json::parse("[[1024]]");
  EXPECT_EQ(histogram_error_of(d, "scenario.json").json_path(), "/training/seq_length_histogram/0");

  d["training"]["seq_length_histogram"] = "missing.csv";
  e = histogram_error_of(d, (temp_folder() / "scenario.json").string());
  EXPECT_EQ(e.json_path(), "/training/seq_length_histogram");
  EXPECT_NE(std::string(e.what()).find("readable histogram file"), std::string::npos) << e.what();

  d["training"]["seq_length_histogram"] = "lengths.txt";
  EXPECT_NE(std::string(histogram_error_of(d, "scenario.json").what()).find(".json or .csv"), std::string::npos);

  const auto folder = temp_folder();
  write(folder / "bad.json", "[[512, -1]]");
  d["training"]["seq_length_histogram"] = "bad.json";
  e = histogram_error_of(d, (folder / "scenario.json").string());
  EXPECT_EQ(e.file(), (folder / "bad.json").string());
  EXPECT_EQ(e.json_path(), "/0/1");
}

TEST(SeqLengthHistogram, NotTogetherWithBuckets) {
  json d = histogram_scenario();
  d["training"]["seq_length_buckets"] = json::parse(R"([{"max": 8192, "fraction": 1}])");
  d["training"]["seq_length_histogram"] = json::parse("[[1024, 3]]");
  const InputError e = histogram_error_of(d, "scenario.json");
  EXPECT_EQ(e.json_path(), "/training/seq_length_histogram");
  EXPECT_NE(std::string(e.what()).find("not both"), std::string::npos);
}

TEST(HotSwitchPreconditions, DistributionDenseModelAndAtMost64Gpus) {
  json d = histogram_scenario();
  d["search"] = {{"hot_switch", true}};
  EXPECT_NE(std::string(histogram_error_of(d, "s.json").what()).find("needs a sequence-length distribution"),
            std::string::npos);
  d["training"]["seq_length_buckets"] = json::parse(R"([{"max": 4096, "fraction": 0.5}, {"max": 8192, "fraction": 0.5}])");
  EXPECT_NO_THROW(parse_scenario(d, "s.json"));
  json moe = d;
  moe["model"]["preset"] = "mixtral-8x7b";
  EXPECT_NE(std::string(histogram_error_of(moe, "s.json").what()).find("dense models"), std::string::npos);
  json big = d;
  big["cluster"]["nodes"][0]["count"] = 9;
  big["cluster"]["nodes"][0]["nics"] = {{"count", 8}, {"bandwidth_Gbps", 400}};
  const InputError e = histogram_error_of(big, "s.json");
  EXPECT_EQ(e.json_path(), "/search/hot_switch");
  EXPECT_NE(std::string(e.what()).find("at most 64 GPUs, the cluster has 72"), std::string::npos) << e.what();
}

}  // namespace
}  // namespace twin
