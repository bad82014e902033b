// report.html of shipped scenarios, rendered in headless Chromium at 1,400 px (label `browser`): tests/reports/
// report_check.js runs in the page after the report's script and the DOM Chromium dumps carries its verdict: no
// label outside its chart, no text out of its box, no sideways scrolling, the trade-off view with named points and
// the front, and a table drawn from the embedded data that sorts by number and by text and filters. Skipped, with
// a message, where Chromium is absent (tools/deps.sh installs it for the test command).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
constexpr const char* kChromium = "/usr/bin/chromium";
constexpr int kWindowWidthPx = 1400;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A fresh profile per run so no state leaks between runs; networking features off since the page needs none.
std::string chromium(const fs::path& profile, const std::string& action, const fs::path& page, const fs::path& out) {
  return "timeout 120 " + std::string(kChromium) +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
         " --disable-component-update --disable-sync --user-data-dir=" + profile.string() + " " + action +
         " --window-size=" + std::to_string(kWindowWidthPx) + ",1800 file://" + page.string() + " > " + out.string() +
         " 2> " + out.string() + ".log";
}

class ReportInBrowser : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!fs::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed (tools/deps.sh installs it): skipped";
    directory_ = fs::temp_directory_path() / ("twin_report_browser_" + std::to_string(::getpid()) + "_" + GetParam());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
    const fs::path scenario = fs::path(TWIN_SOURCE_DIR) / "scenarios" / (std::string(GetParam()) + ".json");
    const std::string simulate = std::string(TWIN_BINARY) + " simulate " + scenario.string() + " --out " +
                                 (directory_ / "run").string() + " --quiet > " + (directory_ / "simulate.log").string() +
                                 " 2>&1";
    ASSERT_EQ(std::system(simulate.c_str()), 0) << read_text(directory_ / "simulate.log");
  }
  void TearDown() override {
    if (!directory_.empty() && !std::getenv("TWIN_KEEP_RENDER")) fs::remove_all(directory_);
  }
  fs::path report() const { return directory_ / "run" / "report.html"; }

  fs::path directory_;
};

TEST_P(ReportInBrowser, NothingClippedTheTableSortsAndFiltersAndAScreenshotShowsIt) {
  std::string html = read_text(report());
  const std::string check = "<script>" + read_text(fs::path(TWIN_SOURCE_DIR) / "tests/reports/report_check.js") +
                            "</script>\n</body>";
  html.replace(html.rfind("</body>"), 7, check);
  const fs::path checked = directory_ / "checked.html", dom = directory_ / "dom.html";
  write_text(checked, html);
  ASSERT_EQ(std::system(chromium(directory_ / "profile-dom", "--dump-dom", checked, dom).c_str()), 0)
      << read_text(dom.string() + ".log");
  const std::string text = read_text(dom);
  const std::string open = "<pre id=\"twin-check\">";
  const std::size_t begin = text.rfind(open);
  ASSERT_NE(begin, std::string::npos) << "the check did not run: " << read_text(dom.string() + ".log").substr(0, 2000);
  std::string verdict = text.substr(begin + open.size(), text.find("</pre>", begin) - begin - open.size());
  for (const auto& [escaped, plain] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}})
    for (std::size_t at = verdict.find(escaped); at != std::string::npos; at = verdict.find(escaped, at + 1))
      verdict.replace(at, std::string(escaped).size(), plain);
  const nlohmann::json result = nlohmann::json::parse(verdict);
  const nlohmann::json& facts = result["facts"];
  EXPECT_TRUE(result["failures"].empty()) << result["failures"].dump(1);
  EXPECT_EQ(facts["window_width"], kWindowWidthPx);
  EXPECT_GT(facts["tradeoff_points"].get<int>(), 10);
  EXPECT_EQ(facts["named_points"], facts["tradeoff_points"]);
  EXPECT_GE(facts["front_rows"].get<int>(), 1);
  EXPECT_EQ(facts["table_rows"], std::min(facts["data_rows"].get<int>(), 1000));
  EXPECT_TRUE(facts["sorted_ascending"].get<bool>());
  EXPECT_TRUE(facts["sorted_descending"].get<bool>());
  EXPECT_TRUE(facts["sorted_text"].get<bool>());
  EXPECT_TRUE(facts["filter_holds"].get<bool>());
  EXPECT_GT(facts["filtered_rows"].get<int>(), 0);
  EXPECT_LT(facts["filtered_rows"], facts["unfiltered_rows"]);
  EXPECT_TRUE(facts["compare_holds"].get<bool>());  // "memory<60 1f1b": a comparison and a word, both held
  EXPECT_GT(facts["compared_rows"].get<int>(), 0);
  EXPECT_LT(facts["compared_rows"], facts["unfiltered_rows"]);
  EXPECT_EQ(facts["moe_all_to_all"].get<bool>(), std::string(GetParam()).find("mixtral") == 0);

  // And a real picture of it (a blank 1400x1800 page compresses to a few KB; charts, text and tables, far more).
  const fs::path png = directory_ / "report.png";
  ASSERT_EQ(std::system(chromium(directory_ / "profile-shot", "--screenshot=" + png.string(), report(),
                                 directory_ / "shot.txt").c_str()),
            0)
      << read_text(directory_ / "shot.txt.log");
  const std::string image = read_text(png);
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(image.size(), 60u * 1024) << "screenshot looks empty";
}

// An MoE search (the side-by-side's MoE facts) and asymmetric plans over mixed GPUs, whose keys run to 200 characters.
INSTANTIATE_TEST_SUITE_P(ShippedScenarios, ReportInBrowser,
                         ::testing::Values("mixtral-8x7b-64xH100", "mixed-h100-a100-llama2-13b"));

}  // namespace
