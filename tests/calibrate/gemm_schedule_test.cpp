// How twin calibrate splits, batches, merges and resumes its GEMM work (calibrate/gemm_schedule.hpp,
// calibrate/gemm_merge.hpp, calibrate/gemm_partial.hpp), without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <numeric>

#include "calibrate/gemm_merge.hpp"
#include "calibrate/gemm_partial.hpp"
#include "calibrate/gemm_schedule.hpp"
#include "calibrate/calibration_progress.hpp"
#include "core/error.hpp"

namespace twin {
namespace {

GemmShape square(std::int64_t size) { return GemmShape{size, size, size, 1, false, false}; }

Measurement timing(double ns, double clock_MHz) {
  Measurement m;
  m.median_ns = ns, m.p10_ns = 0.99 * ns, m.p90_ns = 1.01 * ns, m.samples = 10, m.sm_clock_MHz = clock_MHz;
  return m;
}

TEST(SplitByCost, BalancesTheLoadAndCoversEveryShapeOnce) {
  const std::vector<double> cost = {9, 1, 1, 7, 3, 3, 2, 8, 5, 1};
  const auto parts = split_by_cost(cost, 3);
  ASSERT_EQ(parts.size(), 3u);
  std::vector<std::size_t> all;
  std::vector<double> loads;
  for (const auto& part : parts) {
    EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
    all.insert(all.end(), part.begin(), part.end());
    double load = 0;
    for (std::size_t i : part) load += cost[i];
    loads.push_back(load);
  }
  std::sort(all.begin(), all.end());
  std::vector<std::size_t> expected(cost.size());
  std::iota(expected.begin(), expected.end(), std::size_t{0});
  EXPECT_EQ(all, expected);
  // 40 in all: the greedy gives 14/13/13.
  EXPECT_LE(*std::max_element(loads.begin(), loads.end()) - *std::min_element(loads.begin(), loads.end()), 1.0);
  EXPECT_EQ(split_by_cost(cost, 3), parts);  // deterministic
}

TEST(GemmRankShares, AgreementShapesOnEveryRankTheRestOnce) {
  std::vector<GemmShape> shapes;
  for (std::int64_t s : {256, 512, 1024, 2048, 3072, 4096, 6144, 8192}) shapes.push_back(square(s));
  std::vector<double> cost;
  for (const GemmShape& s : shapes) cost.push_back(gemm_flops(s));
  const auto shares = gemm_rank_shares(shapes, cost, 4);
  ASSERT_EQ(shares.size(), 4u);
  std::vector<int> times(shapes.size(), 0);
  for (const auto& share : shares)
    for (std::size_t i : share) ++times[i];
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const bool agreement = shapes[i].m == 1024 || shapes[i].m == 2048 || shapes[i].m == 4096 || shapes[i].m == 8192;
    EXPECT_EQ(times[i], agreement ? 4 : 1) << gemm_key(shapes[i]);
  }
  const auto alone = gemm_rank_shares(shapes, cost, 1);  // one GPU: every shape once
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_EQ(alone[0].size(), shapes.size());
}

TEST(BatchStarts, CutsByCostAndCount) {
  const std::vector<std::size_t> order = {4, 3, 2, 1, 0};
  const std::vector<double> cost = {1, 1, 10, 1, 1};
  EXPECT_EQ(batch_starts(order, cost, 2.5, 100), (std::vector<std::size_t>{0, 3, 5}));  // 1+1+10 | 1+1
  EXPECT_EQ(batch_starts(order, cost, 1e9, 2), (std::vector<std::size_t>{0, 2, 4, 5}));
  EXPECT_EQ(batch_starts({}, cost, 1, 1), (std::vector<std::size_t>{0}));
}

TEST(GemmOperandLayout, RotatesSetsSpanningTwiceTheL2AndRefusesWhatDoesNotFit) {
  const std::size_t l2 = 50 << 20;
  const auto small = gemm_operand_layout(square(256), l2, 1ull << 30);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->sets, kGemmMaxInputSets);  // 256 KiB a set: as many as allowed
  EXPECT_EQ(small->b_offsets[0], small->a_offsets[0] + 256 * 256 * 2);
  EXPECT_EQ(small->bytes, small->c_offset + 256 * 256 * 2);
  const auto large = gemm_operand_layout(square(8192), l2, 1ull << 32);
  ASSERT_TRUE(large);
  EXPECT_EQ(large->sets, 1u);  // 256 MiB a set already spans the L2
  EXPECT_FALSE(gemm_operand_layout(square(16384), l2, 1ull << 30));
}

TEST(MergeGemmTimings, PoolsGpusAtOneClockInShapeOrderAndReportsAgreement) {
  const std::vector<GemmShape> shapes = {square(1024), square(2048), square(99999)};
  std::vector<GemmShapeTimings> timings(3);
  // Shape 0 on two GPUs; GPU 1 ran at half the clock and took twice as long: the same cycles.
  timings[0].rounds = {{timing(100, 1500), timing(102, 1500)}, {timing(200, 750), timing(204, 750)}};
  timings[1].rounds = {{}, {timing(1000, 1500)}};
  const GemmCalibration merged = merge_gemm_timings(shapes, timings, 989, 0, 2);
  ASSERT_EQ(merged.measured.size(), 2u);
  EXPECT_EQ(merged.measured[0].first.m, 1024);
  EXPECT_EQ(merged.measured[1].first.m, 2048);
  ASSERT_EQ(merged.skipped.size(), 1u);
  EXPECT_EQ(merged.skipped[0].m, 99999);
  EXPECT_DOUBLE_EQ(merged.reference_sm_clock_MHz, 1500);  // the lower middle of 750, 750, 1500, 1500, 1500
  EXPECT_NEAR(merged.measured[0].second.median_ns, 100, 2.01);
  const nlohmann::json& agreement = merged.gpu_agreement;
  ASSERT_FALSE(agreement.is_null());
  ASSERT_EQ(agreement["shapes"].size(), 1u);  // shape 1 was timed by one GPU only
  EXPECT_NEAR(agreement["max_spread_at_reference_clock"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(agreement["max_spread_as_timed"].get<double>(), 1.0, 0.02);  // 101 against 202 ns
  // The same timings, the same bytes: nothing depends on which GPU reported first.
  EXPECT_EQ(merge_gemm_timings(shapes, timings, 989, 0, 2).gpu_agreement.dump(), agreement.dump());
  // A fixed reference clock (shapes added to a profile) is kept.
  EXPECT_DOUBLE_EQ(merge_gemm_timings(shapes, timings, 989, 1000, 0).reference_sm_clock_MHz, 1000);
  EXPECT_THROW(merge_gemm_timings(shapes, std::vector<GemmShapeTimings>(3), 989, 0, 2), std::runtime_error);
}

class GemmPartialFile : public ::testing::Test {
 protected:
  // One folder per test and process: ctest runs these tests as separate processes at once, and one's TearDown
  // must not remove the file another is reading.
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("twin_gemm_partial_test_" +
                               std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
                               std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

TEST_F(GemmPartialFile, RoundTripsAndRefusesAnotherCalibration) {
  const std::vector<GemmShape> shapes = {square(1024), square(2048)};
  const nlohmann::json arguments = {{"quick", false}, {"scenario", ""}, {"profile", ""}};
  const auto identity = gemm_partial_identity(arguments, "00ff", 0, 4, shapes);
  const auto path = gemm_partial_path(dir / "p.json", 0);
  EXPECT_EQ(path.filename(), "p.json.partial.0.json");
  EXPECT_TRUE(load_gemm_partial(path, identity, shapes).empty());  // no file: nothing done
  GemmPartialTimings done;
  done[{1, 2}] = timing(1234.5, 1700);
  save_gemm_partial(path, identity, shapes, done);
  const GemmPartialTimings back = load_gemm_partial(path, identity, shapes);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_DOUBLE_EQ(back.at({1, 2}).median_ns, 1234.5);
  EXPECT_DOUBLE_EQ(back.at({1, 2}).sm_clock_MHz, 1700);
  const auto expect_refused = [&](const nlohmann::json& other, const std::string& field) {
    try {
      load_gemm_partial(path, other, shapes);
      ADD_FAILURE() << "accepted another " << field;
    } catch (const InputError& e) {
      EXPECT_EQ(e.json_path(), "/identity/" + field);
      EXPECT_NE(e.expected().find("another"), std::string::npos) << e.expected();
    }
  };
  expect_refused(gemm_partial_identity({{"quick", true}, {"scenario", ""}, {"profile", ""}}, "00ff", 0, 4, shapes),
                 "arguments");
  expect_refused(gemm_partial_identity(arguments, "00fe", 0, 4, shapes), "gpu_uuid");
  expect_refused(gemm_partial_identity(arguments, "00ff", 0, 2, shapes), "world_size");
  const std::vector<GemmShape> fewer = {square(1024)};
  expect_refused(gemm_partial_identity(arguments, "00ff", 0, 4, fewer), "shape_count");
}

TEST_F(GemmPartialFile, RefusesAMalformedFileWithItsPath) {
  const std::vector<GemmShape> shapes = {square(1024)};
  const auto identity = gemm_partial_identity({{"quick", false}}, "00ff", 0, 1, shapes);
  const auto path = gemm_partial_path(dir / "p.json", 0);
  for (const std::string& text :
       {std::string("{\"format\": \"twin calibrate: partial GEMM timings\", \"identity\": ") + identity.dump() +
            ", \"timings\": [{\"shape\": \"gemm:m=3\", \"round\": 0, \"median_ns\": 1, \"p10_ns\": 1, \"p90_ns\": 1, "
            "\"samples\": 1, \"sm_clock_MHz\": 1}]}",
        std::string("{\"format\": \"twin calibrate: partial GEMM timings\", \"identity\": ") + identity.dump() +
            ", \"timings\": [{\"shape\": \"gemm:m=1024,n=1024,k=1024,count=1,ta=0,tb=0\", \"round\": 0, "
            "\"median_ns\": -1, \"p10_ns\": 1, \"p90_ns\": 1, \"samples\": 1, \"sm_clock_MHz\": 1}]}",
        std::string("[1, 2"), std::string("{\"format\": \"something else\"}")}) {
    std::ofstream(path) << text;
    EXPECT_THROW(load_gemm_partial(path, identity, shapes), InputError) << text;
  }
}

// The fuzzer's seed (tests/fuzz/fuzz_inputs.cpp, selector '6') is a file the reader accepts, so that fuzzing
// starts inside the timings rather than at the identity check.
TEST_F(GemmPartialFile, TheFuzzSeedIsAcceptedWhole) {
  std::ifstream seed(std::string(TWIN_SOURCE_DIR) + "/tests/fuzz/inputs/6_gemm_partial.json");
  std::string text((std::istreambuf_iterator<char>(seed)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  const auto path = dir / "seed.json";
  std::ofstream(path) << text.substr(1);
  const std::vector<GemmShape> shapes = {square(1024), square(2048)};
  const auto timings = load_gemm_partial(path, gemm_partial_identity({{"quick", false}}, "00ff", 0, 1, shapes), shapes);
  EXPECT_EQ(timings.size(), 2u);
  EXPECT_EQ(timings.count({1, 2}), 1u);
}

TEST(ProgressText, SaysHowFarAndTheTimeLeftByWeight) {
  EXPECT_EQ(progress_text("GEMMs", 25, 100, 900, 1000, "timings", 10),
            "GEMMs 25% (900 of 1000 timings), 10 s, about 30 s left");
  EXPECT_EQ(progress_text("GEMMs", 100, 100, 1000, 1000, "timings", 40), "GEMMs 100% (1000 of 1000 timings), 40 s");
}

}  // namespace
}  // namespace twin
