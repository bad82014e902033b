// Renders report.html in headless Chromium: the page must load offline, produce a real screenshot, and
// its DOM must hold the ranking table with one row per candidate. Skipped where Chromium is absent.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "reports/html_report.hpp"
#include "tests/reports/report_fixture.hpp"

namespace twin {
namespace {

constexpr const char* kChromium = "/usr/bin/chromium";

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// A fresh profile per run so no state leaks between runs; networking features off since the page needs none.
std::string chromium_command(const std::filesystem::path& profile, const std::string& action, const std::string& url) {
  return std::string("timeout 120 ") + kChromium +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
         " --disable-component-update --disable-sync --user-data-dir=" + profile.string() + " " + action +
         " --window-size=1400,2000 " + url;
}

class HtmlRender : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kChromium)) GTEST_SKIP() << kChromium << " is not installed: render test skipped";
    directory_ = std::filesystem::temp_directory_path() / ("twin_html_render_" + std::to_string(::getpid()));
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
    const auto ranked = testing::ranked_candidates();
    write_html_report(directory_ / "report.html", testing::small_scenario(), ranked, testing::two_stage_graph(),
                      ranked[0]);
    candidates_ = ranked.size();
  }
  void TearDown() override {
    if (!directory_.empty() && !std::getenv("TWIN_KEEP_RENDER")) std::filesystem::remove_all(directory_);
  }
  std::string url() const { return "file://" + (directory_ / "report.html").string(); }

  std::filesystem::path directory_;
  std::size_t candidates_ = 0;
};

TEST_F(HtmlRender, ScreenshotIsARealImage) {
  const auto png = directory_ / "report.png";
  const std::string command = chromium_command(directory_ / "profile-shot", "--screenshot=" + png.string(), url()) +
                              " > " + (directory_ / "shot.log").string() + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_text(directory_ / "shot.log");
  ASSERT_TRUE(std::filesystem::exists(png));
  const std::string image = read_text(png);
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // A blank 1400x2000 page compresses to a few KB; charts, text and the table make it far larger.
  EXPECT_GT(image.size(), 60u * 1024) << "screenshot looks empty";
}

TEST_F(HtmlRender, DomHoldsTheRankingTable) {
  const auto dom_path = directory_ / "dom.html";
  const std::string command = chromium_command(directory_ / "profile-dom", "--dump-dom", url()) + " > " +
                              dom_path.string() + " 2> " + (directory_ / "dom.log").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << read_text(directory_ / "dom.log");
  const std::string dom = read_text(dom_path);
  EXPECT_NE(dom.find("id=\"ranking\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_EQ(count(dom, "<tr class=\"feasible\">") + count(dom, "<tr class=\"infeasible\">"), candidates_);
  EXPECT_EQ(count(dom, "<svg "), 3u);
}

}  // namespace
}  // namespace twin
