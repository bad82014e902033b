// The scenario's "sweep" section: its points (every combination, nodes outermost), their labels and folders, and the
// bounds refused up front at their JSON paths.
#include "core/scenario_sweep.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"
#include "tests/core/scenario_error_path.hpp"

namespace twin {
namespace {

using nlohmann::json;
using testing::error_path;

json with_sweep(const json& sweep) {
  json d = json::parse(R"({
    "model": {"preset": "llama2-7b"}, "training": {"seq_length": 4096, "global_batch_size": 64},
    "cluster": {"nodes": [{"count": 1, "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "nics": {"count": 8, "bandwidth_Gbps": 400}}]}})");
  d["sweep"] = sweep;
  return d;
}

TEST(ScenarioSweep, PointsAreEveryCombinationNodesOutermost) {
  const json d = with_sweep(json::parse(R"({"nodes": [1, 2], "gpu": ["h200-141gb", "A100-SXM-80GB"]})"));
  parse_scenario(d, "s.json");
  const std::optional<SweepAxes> axes = parse_sweep_section(JsonReader(d, "s.json"));
  ASSERT_TRUE(axes);
  EXPECT_EQ(axes->point_count(), 4u);
  const std::vector<SweepPoint> points = sweep_points(d, *axes);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].label, "nodes=1 gpu=H200-141GB");
  EXPECT_EQ(points[1].label, "nodes=1 gpu=A100-SXM-80GB");
  EXPECT_EQ(points[3].folder, "nodes-2_gpu-A100-SXM-80GB");
  EXPECT_FALSE(points[3].document.contains("sweep"));
  const Scenario last = parse_scenario(points[3].document, "s.json");
  EXPECT_EQ(last.cluster.total_gpus(), 16);
  EXPECT_EQ(last.cluster.node_groups[0].gpu.name, "A100-SXM-80GB");
}

TEST(ScenarioSweep, BatchAndLengthReplaceTheTrainingFields) {
  const json d = with_sweep(json::parse(R"({"global_batch_size": [32, 128], "seq_length": [2048]})"));
  const std::vector<SweepPoint> points = sweep_points(d, *parse_sweep_section(JsonReader(d, "s.json")));
  ASSERT_EQ(points.size(), 2u);
  const Scenario second = parse_scenario(points[1].document, "s.json");
  EXPECT_EQ(second.training.global_batch_size, 128);
  EXPECT_EQ(second.training.seq_length, 2048);
  EXPECT_EQ(points[1].label, "global_batch_size=128 seq_length=2048");
}

TEST(ScenarioSweep, BoundsAndErrorsAtTheirJsonPaths) {
  std::string message;
  json many = json::array();
  for (int i = 1; i <= 9; ++i) many.push_back(i * 512);
  EXPECT_EQ(error_path(with_sweep({{"seq_length", many}, {"global_batch_size", many}}), message), "/sweep");
  EXPECT_NE(message.find("at most 64 points, got 81"), std::string::npos) << message;
  EXPECT_EQ(error_path(with_sweep(json::parse(R"({"nodes": [1, 2, 1]})")), message), "/sweep/nodes/2");
  EXPECT_NE(message.find("distinct"), std::string::npos) << message;
  EXPECT_EQ(error_path(with_sweep(json::parse(R"({"gpu": ["H100"]})")), message), "/sweep/gpu/0");
  EXPECT_EQ(error_path(with_sweep(json::parse(R"({})")), message), "/sweep");
  EXPECT_EQ(error_path(with_sweep(json::parse(R"({"nodes": []})")), message), "/sweep/nodes");
  EXPECT_EQ(error_path(with_sweep(json::parse(R"({"node": [1]})")), message), "/sweep/node");
  EXPECT_NE(message.find("did you mean 'nodes'"), std::string::npos) << message;
  json mixed = with_sweep(json::parse(R"({"nodes": [1, 2]})"));
  mixed["cluster"]["nodes"].push_back(mixed["cluster"]["nodes"][0]);
  EXPECT_EQ(error_path(mixed, message), "/sweep/nodes");
  EXPECT_NE(message.find("one node group"), std::string::npos) << message;
}

}  // namespace
}  // namespace twin
