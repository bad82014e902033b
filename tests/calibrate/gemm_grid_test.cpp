// The default GEMM calibration grid (calibrate/gemm_grid.hpp): its sizes and layouts, the slow shapes it
// leaves out, its estimated GPU time against the built-in model's closed form, and the check's model
// GEMMs lying off it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "calibrate/gemm_grid.hpp"
#include "cost/profile.hpp"
#include "core/cluster.hpp"

namespace twin {
namespace {

using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, bool, bool>;
Key key(const GemmShape& g) { return {g.m, g.n, g.k, g.count, g.transpose_a, g.transpose_b}; }

const std::vector<std::int64_t> kPowers = {256, 512, 1024, 2048, 4096, 8192, 16384};

GpuSpec h200() { return *gpu_preset("H200-141GB"); }

TEST(GemmGrid, HalfOctaveSizes) {
  EXPECT_EQ(half_octave_sizes(), (std::vector<std::int64_t>{256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
                                                            12288, 16384, 24576, 32768}));
  EXPECT_TRUE(is_power_of_two(4096));
  EXPECT_FALSE(is_power_of_two(6144));
  EXPECT_FALSE(is_power_of_two(0));
}

TEST(GemmGrid, EstimatedKernelTimeIsTheGridsFixedHopperModel) {
  // 0.80 * F / (F + 1.5e9) of 989.4 TFLOP/s; 4096^3 is compute-bound.
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double expected_ns = flops / (989.4e3 * 0.80 * flops / (flops + 1.5e9));
  const GemmShape cube{4096, 4096, 4096, 1, false, false};
  EXPECT_NEAR(estimated_gemm_kernel_ns(cube, h200()), expected_ns, 1.0);
  // 3 rounds of (2 warm-up + 5 timed) launches, and one round in quick mode; each estimate is rounded to 1 ns.
  EXPECT_NEAR(estimated_gemm_calibration_seconds({cube, cube}, h200(), false), 2 * 21 * expected_ns * 1e-9, 42e-9);
  EXPECT_NEAR(estimated_gemm_calibration_seconds({cube}, h200(), true), 7 * expected_ns * 1e-9, 7e-9);
}

TEST(GemmGrid, QuickGridIsThreeSizesInFourLayouts) {
  const GemmGrid grid = default_gemm_grid(true, h200());
  EXPECT_EQ(grid.shapes.size(), 3u * 3 * 3 * 4);
  EXPECT_EQ(grid.left_out_slow, 0);
  for (const GemmShape& g : grid.shapes)
    for (std::int64_t size : {g.m, g.n, g.k}) EXPECT_TRUE(size == 512 || size == 2048 || size == 8192) << size;
}

TEST(GemmGrid, FullGridIsOctavesInFourLayoutsAndHalfOctavesInTheLoweringsLayout) {
  const GpuSpec gpu = h200();
  const GemmGrid grid = default_gemm_grid(false, gpu);
  std::set<Key> keys;
  for (const GemmShape& g : grid.shapes) keys.insert(key(g));
  ASSERT_EQ(keys.size(), grid.shapes.size()) << "shapes repeat";
  EXPECT_TRUE(std::is_sorted(grid.shapes.begin(), grid.shapes.end(),
                             [](const GemmShape& a, const GemmShape& b) { return key(a) < key(b); }));
  // Every power-of-two shape in every layout, however slow.
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t m : kPowers)
        for (std::int64_t n : kPowers)
          for (std::int64_t k : kPowers) EXPECT_TRUE(keys.count({m, n, k, 1, ta, tb})) << m << " " << n << " " << k;
  // Every other shape: half-octave sizes, no transposes, and fast enough.
  const std::vector<std::int64_t> sizes = half_octave_sizes();
  auto half_octave = [&](std::int64_t x) { return std::find(sizes.begin(), sizes.end(), x) != sizes.end(); };
  int slow = 0;
  for (std::int64_t m : sizes)
    for (std::int64_t n : sizes)
      for (std::int64_t k : sizes) {
        const bool octave = [&] {
          for (std::int64_t x : {m, n, k})
            if (std::find(kPowers.begin(), kPowers.end(), x) == kPowers.end()) return false;
          return true;
        }();
        if (octave) continue;
        const GemmShape g{m, n, k, 1, false, false};
        const bool fast = estimated_gemm_kernel_ns(g, gpu) <= kGemmGridMaxKernelNs;
        slow += !fast;
        EXPECT_EQ(keys.count(key(g)) == 1, fast) << m << " " << n << " " << k;
      }
  for (const GemmShape& g : grid.shapes) {
    EXPECT_TRUE(half_octave(g.m) && half_octave(g.n) && half_octave(g.k));
    if (!(is_power_of_two(g.m) && is_power_of_two(g.n) && is_power_of_two(g.k)) || g.m > 16384 || g.n > 16384 ||
        g.k > 16384) {
      EXPECT_FALSE(g.transpose_a || g.transpose_b);
    }
  }
  EXPECT_EQ(grid.left_out_slow, slow);
  EXPECT_GT(slow, 0);  // 12288- and 16384-sized cubes and their neighbours
  EXPECT_EQ(grid.shapes.size(), 4u * 343 + (15u * 15 * 15 - 343) - slow);
  const double seconds = estimated_gemm_calibration_seconds(grid.shapes, gpu, false);
  std::printf("default GEMM grid on %s: %zu shapes, %d half-octave shapes over 5 ms left out, "
              "%.1f s of GPU kernel time estimated\n", gpu.name.c_str(), grid.shapes.size(), slow, seconds);
  RecordProperty("grid_shapes", static_cast<int>(grid.shapes.size()));
  RecordProperty("grid_estimated_seconds", std::to_string(seconds));
  EXPECT_LT(seconds, 35);  // 2026-11-29: 31.8 s estimated on an H200 (59 s with ten timed launches)
}

TEST(GemmGrid, CheckShapesAreModelGemmsOffTheGrid) {
  const std::vector<ModelGemm>& gemms = off_grid_model_gemms();
  EXPECT_GE(gemms.size(), 12u);
  for (const char* gpu_name : {"H200-141GB", "H100-SXM-80GB"}) {
    std::set<Key> grid;
    for (const GemmShape& g : default_gemm_grid(false, *gpu_preset(gpu_name)).shapes) grid.insert(key(g));
    for (const ModelGemm& gemm : gemms) EXPECT_FALSE(grid.count(key(gemm.shape))) << gemm.origin << " on " << gpu_name;
  }
  std::set<Key> distinct;
  for (const ModelGemm& gemm : gemms) {
    EXPECT_TRUE(distinct.insert(key(gemm.shape)).second) << gemm.origin;
    EXPECT_FALSE(gemm.shape.transpose_a || gemm.shape.transpose_b) << "the lowering emits no transposes";
    EXPECT_FALSE(gemm.origin.empty());
  }
}

}  // namespace
}  // namespace twin
