// Work and memory stay bounded under hostile sizes, checked through limits, never through time: a run folder's
// ops.csv is read row by row (its readers keep about what they fold, not the file), and a run that still exhausts
// its memory says so in one line naming what to narrow, never with a library's message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "run_twin.hpp"

namespace twin::test {
namespace {

namespace fs = std::filesystem;

const fs::path kRun = fs::path(TWIN_SOURCE_DIR) / "tests/traces/fixtures/executed/7b4l-mbs1-h200";

// The fixture's run folder with an ops.csv of at least `bytes`: rank 0's rows again as ranks 1, 2, ... (each rank
// lists every op of its class once, so every row is valid and the readers read to the end).
void write_large_run(const fs::path& dir, std::size_t bytes) {
  fs::create_directories(dir);
  for (const char* name : {"best.json", "metrics.json"}) fs::copy_file(kRun / name, dir / name);
  std::istringstream source(read_file(kRun / "ops.csv"));
  std::string header, line;
  std::getline(source, header);
  std::vector<std::pair<std::string, std::string>> rows;  // the text before and after the rank column
  while (std::getline(source, line)) {
    const std::size_t first = line.find(','), second = line.find(',', first + 1);
    if (line.substr(first + 1, second - first - 1) == "0") rows.emplace_back(line.substr(0, first + 1), line.substr(second));
  }
  std::ofstream out(dir / "ops.csv", std::ios::binary);
  out << header << '\n';
  std::size_t written = header.size() + 1;
  for (int rank = 0; written < bytes; ++rank)
    for (const auto& [before, after] : rows) {
      const std::string row = before + std::to_string(rank) + after + '\n';
      out << row;
      written += row.size();
    }
}

// 64 MB of ops.csv under 600 MB of address space: reading it whole took 14 times the file (about 900 MB).
constexpr std::size_t kOpsCsvBytes = 64u << 20;
const std::string kAddressSpaceLimit = "ulimit -v 614400;";  // KiB

TEST(BoundedMemory, TwinReportReadsALargeOpsCsvRowByRow) {
  TempDir dir("large_report");
  write_large_run(dir.path / "run", kOpsCsvBytes);
  const Outcome run = run_twin_under(kAddressSpaceLimit, "report " + (dir.path / "run").string());
  // Read and joined to its end: only then does the missing metrics.json entry of rank 1 show.
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("metrics.json: at /ranks: an entry for rank 1 of class 0 (ops.csv lists it)"),
            std::string::npos) << run.output;
}

TEST(BoundedMemory, RecalibrationFoldsALargeOpsCsvRowByRow) {
  TempDir dir("large_recalibration");
  write_large_run(dir.path / "run", kOpsCsvBytes);
  const Outcome run = run_twin_under(kAddressSpaceLimit, "calibrate --from-trace " + (dir.path / "run").string() +
                                                             " --out " + (dir.path / "p.json").string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(fs::exists(dir.path / "p.json"));
}

TEST(BoundedMemory, ExhaustedMemoryIsNamedWithWhatToNarrow) {
  // Recalibration keeps a sample per row: 64 MB of rows in 200 MB of address space cannot fit. A library's
  // std::bad_alloc must not be the message.
  TempDir dir("out_of_memory");
  write_large_run(dir.path / "run", kOpsCsvBytes);
  const Outcome run = run_twin_under("ulimit -v 204800;", "calibrate --from-trace " + (dir.path / "run").string() +
                                                              " --out " + (dir.path / "p.json").string());
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("twin calibrate: ran out of memory"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("bad_alloc"), std::string::npos) << run.output;
  EXPECT_LT(run.output.size(), 1000u) << run.output;
  EXPECT_FALSE(fs::exists(dir.path / "p.json"));
}

}  // namespace
}  // namespace twin::test
