// The measured interference pairs (cost/interference.hpp): read between points log-linearly in bytes and waves,
// clamped at the ends, the scalars' place left to the caller where a kind has no points; and their JSON, read back
// as written and refused at its path when wrong.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.hpp"
#include "cost/interference.hpp"
#include "cost/profile.hpp"

namespace twin {
namespace {

InterferencePoint gemm_point(OpKind kind, Bytes size, double waves, double compute, double comm) {
  return {kind, size, InterferenceCompute::gemm, waves, compute, comm};
}

std::vector<InterferencePoint> grid() {
  return {gemm_point(OpKind::all_gather, 1 << 20, 0.25, 1.1, 1.2), gemm_point(OpKind::all_gather, 1 << 20, 16, 1.3, 1.6),
          gemm_point(OpKind::all_gather, 1 << 26, 0.25, 1.5, 1.4), gemm_point(OpKind::all_gather, 1 << 26, 16, 1.9, 2.0),
          {OpKind::all_gather, 1 << 20, InterferenceCompute::memory_bound, 0, 1.05, 1.7}};
}

TEST(Interference, AMeasuredPairIsReadAsMeasured) {
  const auto f = measured_interference(grid(), OpKind::all_gather, 1 << 26, InterferenceCompute::gemm, 16);
  ASSERT_TRUE(f);
  EXPECT_DOUBLE_EQ(f->compute_slowdown, 1.9);
  EXPECT_DOUBLE_EQ(f->communication_slowdown, 2.0);
}

TEST(Interference, BetweenPointsLogLinearInBytesAndWaves) {
  // Half way in log of both: the mean of the four corners.
  const double bytes = std::sqrt(double(1 << 20) * double(1 << 26)), waves = std::sqrt(0.25 * 16);
  const auto f = measured_interference(grid(), OpKind::all_gather, bytes, InterferenceCompute::gemm, waves);
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->compute_slowdown, (1.1 + 1.3 + 1.5 + 1.9) / 4, 1e-9);
  EXPECT_NEAR(f->communication_slowdown, (1.2 + 1.6 + 1.4 + 2.0) / 4, 1e-9);
}

TEST(Interference, OutsideTheMeasuredRangeTheNearestEdge) {
  const auto small = measured_interference(grid(), OpKind::all_gather, 1000, InterferenceCompute::gemm, 0.01);
  ASSERT_TRUE(small);
  EXPECT_DOUBLE_EQ(small->compute_slowdown, 1.1);
  const auto large = measured_interference(grid(), OpKind::all_gather, 1e12, InterferenceCompute::gemm, 1000);
  ASSERT_TRUE(large);
  EXPECT_DOUBLE_EQ(large->compute_slowdown, 1.9);
  // The memory-bound point of the smaller size prices every size (it is the only one), whatever the waves.
  const auto bound = measured_interference(grid(), OpKind::all_gather, 1 << 26, InterferenceCompute::memory_bound, 0);
  ASSERT_TRUE(bound);
  EXPECT_DOUBLE_EQ(bound->compute_slowdown, 1.05);
  EXPECT_DOUBLE_EQ(bound->communication_slowdown, 1.7);
}

TEST(Interference, AKindWithoutPointsIsLeftToTheScalars) {
  EXPECT_FALSE(measured_interference(grid(), OpKind::all_reduce, 1 << 22, InterferenceCompute::gemm, 2));
  EXPECT_FALSE(measured_interference({}, OpKind::all_gather, 1 << 22, InterferenceCompute::gemm, 2));
}

TEST(Interference, PipelineAndRingTransfersArePricedAsSendsComputeKindsByTheirClass) {
  EXPECT_EQ(interference_collective(OpKind::recv), OpKind::send);
  EXPECT_EQ(interference_collective(OpKind::all_to_all), OpKind::all_to_all);
  EXPECT_FALSE(interference_collective(OpKind::gemm));
  EXPECT_EQ(interference_compute(OpKind::attention_backward), InterferenceCompute::gemm);
  EXPECT_EQ(interference_compute(OpKind::norm_forward), InterferenceCompute::memory_bound);
}

TEST(Interference, AKernelsWavesAreItsTilesOverTheSms) {
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.gemm = GemmShape{2048, 2048, 2048};
  EXPECT_DOUBLE_EQ(interference_waves(gemm, 128), 1.0);  // 16 x 8 tiles of 128 x 256
  gemm.gemm.count = 64;  // a grouped GEMM's kernels are one group each
  EXPECT_DOUBLE_EQ(interference_waves(gemm, 128), 1.0);
  Op attention;
  attention.kind = OpKind::attention_forward;
  attention.attention = AttentionShape{2, 32, 8, 4096, 4096, 128};
  // 2 x 32 pairs x 64 row tiles of 64 over 128 SMs x 2 slots.
  EXPECT_DOUBLE_EQ(interference_waves(attention, 128), 16.0);
  Op norm;
  norm.kind = OpKind::norm_forward;
  EXPECT_EQ(interference_waves(norm, 128), 0);
}

TEST(Interference, PointsReadBackAsWrittenInAProfile) {
  Profile profile;
  profile.name = "p";
  GpuKernelProfile kernels;
  kernels.gpu = "H200";
  kernels.grouped_gemm_issue_ns = 9300;  // the host's pace, written beside the points by the same calibration
  profile.gpus.push_back(kernels);
  profile.overlap = {1.2, 1.1, grid()};
  const Profile back = profile_from_json(to_json(profile), "p.json");
  EXPECT_EQ(back.gpus[0].grouped_gemm_issue_ns, 9300);
  ASSERT_EQ(back.overlap.points.size(), grid().size());
  for (std::size_t i = 0; i < grid().size(); ++i) {
    EXPECT_EQ(back.overlap.points[i].collective, grid()[i].collective);
    EXPECT_EQ(back.overlap.points[i].size_bytes, grid()[i].size_bytes);
    EXPECT_EQ(back.overlap.points[i].beside, grid()[i].beside);
    EXPECT_DOUBLE_EQ(back.overlap.points[i].gemm_waves, grid()[i].gemm_waves);
    EXPECT_DOUBLE_EQ(back.overlap.points[i].compute_slowdown, grid()[i].compute_slowdown);
    EXPECT_DOUBLE_EQ(back.overlap.points[i].communication_slowdown, grid()[i].communication_slowdown);
  }
}

// The error of reading `point` as the only element: its path and message.
std::string error_of(const nlohmann::json& point) {
  const nlohmann::json array = nlohmann::json::array({point});
  try {
    read_interference_points(JsonReader(array, "p.json", "/overlap/points"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Interference, WrongPointsAreRefusedAtTheirPath) {
  const nlohmann::json good = {{"collective", "all_gather"}, {"size_bytes", 1024}, {"beside", "gemm"},
                               {"gemm_waves", 1.5}, {"compute_slowdown", 1.2}, {"communication_slowdown", 1.1}};
  EXPECT_EQ(error_of(good), "");
  auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json p = good;
    p[key] = value;
    return error_of(p);
  };
  EXPECT_NE(with("collective", "broadcast").find("/overlap/points/0/collective"), std::string::npos);
  EXPECT_NE(with("size_bytes", 0).find("/overlap/points/0/size_bytes"), std::string::npos);
  EXPECT_NE(with("beside", "tensor_core").find("/overlap/points/0/beside"), std::string::npos);
  EXPECT_NE(with("compute_slowdown", 0.9).find("expected a slowdown >= 1"), std::string::npos);
  EXPECT_NE(with("gemm_waves", -1).find("/overlap/points/0/gemm_waves"), std::string::npos);
  EXPECT_NE(with("extra", 1).find("extra"), std::string::npos);
  nlohmann::json bound = good;
  bound["beside"] = "memory_bound";
  EXPECT_NE(error_of(bound).find("no gemm_waves beside a memory-bound kernel"), std::string::npos);
  bound.erase("gemm_waves");
  EXPECT_EQ(error_of(bound), "");
  nlohmann::json no_waves = good;
  no_waves.erase("gemm_waves");
  EXPECT_NE(error_of(no_waves).find("gemm_waves"), std::string::npos);
  const nlohmann::json twice = nlohmann::json::array({good, good});
  EXPECT_THROW(read_interference_points(JsonReader(twice, "p.json", "/overlap/points")), InputError);
}

}  // namespace
}  // namespace twin
