// gpu_clocks.csv, the clock a run's GPUs held (traces/gpu_clocks.hpp): busy samples only, nvidia-smi's
// unreadable fields and a last line cut short tolerated, anything else malformed named by its line.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "traces/gpu_clocks.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

fs::path written(const std::string& name, const std::string& text) {
  const fs::path path = test::scratch_path(name + ".csv");
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(GpuClocks, MedianOfTheBusySamplesOfEveryGpu) {
  const fs::path path = written("busy",
                                "0, 1980, 120.5, 0\n"          // idle at start-up: left out
                                "1, 1980, 118.0, 5\n"
                                "0, 1500, 690.1, 100\n"
                                "1, 1410, 699.9, 97\n"
                                "0, 1455, 695.0, 92\n"
                                "1, 1620, [N/A], 100\n"        // power unreadable: left out
                                "0, 1440, 688.0, 89\n"         // below 90%: left out
                                "1, 14");                      // cut short when the sampler stopped
  const std::optional<GpuClockSummary> summary = read_gpu_clocks(path);
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->busy_samples, 3);
  EXPECT_DOUBLE_EQ(summary->sm_clock_MHz, 1455);
  EXPECT_DOUBLE_EQ(summary->power_W, 695.0);
  fs::remove(path);
}

TEST(GpuClocks, NoBusySampleIsNoClock) {
  const fs::path path = written("idle", "0, 1980, 80, 0\n\n0, 1980, 81, 3\n");
  EXPECT_FALSE(read_gpu_clocks(path));
  fs::remove(path);
}

TEST(GpuClocks, MalformedLinesAreNamed) {
  for (const std::string& line : std::vector<std::string>{"0, 1500, 690\n", "0, fast, 690, 100\n", "0, 1500, 690, 100, 3\n", "0, -5, 690, 100\n",
                                  std::string("0, 15") + '\0' + "00, 690, 100\n"}) {
    const fs::path path = written("bad", "0, 1500, 690, 100\n" + line);
    try {
      read_gpu_clocks(path);
      ADD_FAILURE() << "accepted: " << line;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("at line 2"), std::string::npos) << e.what();
      EXPECT_EQ(e.file(), path.string());
    }
    fs::remove(path);
  }
  EXPECT_THROW(read_gpu_clocks("/nonexistent/gpu_clocks.csv"), InputError);
}

}  // namespace
}  // namespace twin
