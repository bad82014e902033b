// GPU presets, rank placement over node groups, inter-node bandwidth, and strategy names.
#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/strategy.hpp"

namespace twin {
namespace {

TEST(GpuPresets, DatasheetNumbers) {
  auto h100 = gpu_preset("h100-sxm-80gb");
  ASSERT_TRUE(h100.has_value());
  EXPECT_EQ(h100->name, "H100-SXM-80GB");
  EXPECT_DOUBLE_EQ(h100->peak_bf16_tflops, 989.4);
  EXPECT_DOUBLE_EQ(h100->hbm_bandwidth_GBps, 3350);
  EXPECT_DOUBLE_EQ(h100->nvlink_bandwidth_GBps, 450);
  EXPECT_EQ(h100->sm_count, 132);
  EXPECT_NEAR(h100->memory_GiB, 79.65, 0.01);  // 81559 MiB as nvidia-smi reports it
  EXPECT_DOUBLE_EQ(gpu_preset("A100-SXM-80GB")->memory_GiB, 80.0);
  EXPECT_DOUBLE_EQ(gpu_preset("A800-80GB")->nvlink_bandwidth_GBps, 200);
  EXPECT_DOUBLE_EQ(gpu_preset("RTX-3080Ti")->peak_bf16_tflops, 68.2);
  EXPECT_FALSE(gpu_preset("MI300X").has_value());
  EXPECT_EQ(gpu_preset_names().size(), 11u);
}

// FP8 peaks and the Blackwell presets: docs/PROFILES.md "GPU presets and their sources" gives each number's source.
TEST(GpuPresets, Fp8PeaksAndBlackwell) {
  EXPECT_DOUBLE_EQ(gpu_preset("H100-SXM-80GB")->peak_fp8_tflops, 1978.9);
  EXPECT_DOUBLE_EQ(gpu_preset("A100-SXM-80GB")->peak_fp8_tflops, 0);
  EXPECT_FALSE(gpu_preset("H200-141GB")->mxfp8);
  const GpuSpec b200 = *gpu_preset("b200"), gb200 = *gpu_preset("GB200"), gb300 = *gpu_preset("GB300");
  EXPECT_DOUBLE_EQ(b200.peak_bf16_tflops, 2250);
  EXPECT_DOUBLE_EQ(b200.peak_fp8_tflops, 4500);
  EXPECT_DOUBLE_EQ(b200.hbm_bandwidth_GBps, 7700);
  EXPECT_NEAR(b200.memory_GiB, 179.06, 0.01);  // 183359 MiB
  EXPECT_DOUBLE_EQ(gb200.peak_fp8_tflops, 5000);
  EXPECT_NEAR(gb200.memory_GiB, 185.03, 0.01);  // 189471 MiB
  EXPECT_DOUBLE_EQ(gb300.peak_bf16_tflops, 2500);
  for (const GpuSpec& g : {b200, gb200, gb300}) {
    EXPECT_DOUBLE_EQ(g.nvlink_bandwidth_GBps, 900) << g.name;  // NVLink 5: 1.8 TB/s both directions
    EXPECT_TRUE(g.mxfp8) << g.name;
  }
}

// An NVL72 rack: 18 nodes of 4 GPUs in one NVLink domain; the next rack is the next domain.
TEST(ClusterLayout, NvlinkDomainsSpanNodes) {
  Cluster c;
  NodeGroup rack{36, *gpu_preset("GB200"), 4, {}, {4, 400, 0}};
  rack.nvlink_domain_gpus = 72;
  c.node_groups = {rack};
  EXPECT_EQ(c.node_of_rank(71), 17);
  EXPECT_EQ(c.nvlink_domain_of_rank(0), 0);
  EXPECT_EQ(c.nvlink_domain_of_rank(71), 0);
  EXPECT_EQ(c.nvlink_domain_of_rank(72), 1);
  c.node_groups.front().nvlink_domain_gpus = 0;  // the node alone
  EXPECT_EQ(c.nvlink_domain_of_rank(71), 17);
}

TEST(GpuPresets, DefaultIntraNodeLink) {
  const IntraNodeLink nvswitch = default_intra_node(*gpu_preset("H200-141GB"));
  EXPECT_EQ(nvswitch.kind, IntraNodeKind::nvswitch);
  EXPECT_DOUBLE_EQ(nvswitch.bandwidth_GBps, 450);
  EXPECT_DOUBLE_EQ(nvswitch.latency_us, 2);
  const IntraNodeLink pcie = default_intra_node(*gpu_preset("RTX-4090"));
  EXPECT_EQ(pcie.kind, IntraNodeKind::pcie);
  EXPECT_DOUBLE_EQ(pcie.bandwidth_GBps, 32);
  EXPECT_DOUBLE_EQ(pcie.latency_us, 5);
  EXPECT_EQ(intra_node_kind_from_string("PCIe"), IntraNodeKind::pcie);
  EXPECT_FALSE(intra_node_kind_from_string("infiniband").has_value());
}

Cluster two_groups() {
  Cluster c;
  NodeGroup h100{2, *gpu_preset("H100-SXM-80GB"), 8, {}, {8, 400, 0}};
  NodeGroup a100{1, *gpu_preset("A100-SXM-80GB"), 4, {}, {4, 200, 0}};
  c.node_groups = {h100, a100};
  return c;
}

TEST(ClusterLayout, RanksAreNumberedGroupByGroupNodeByNode) {
  const Cluster c = two_groups();
  EXPECT_EQ(c.total_gpus(), 20);
  EXPECT_EQ(c.total_nodes(), 3);
  EXPECT_FALSE(c.is_homogeneous());
  EXPECT_EQ(c.node_of_rank(0), 0);
  EXPECT_EQ(c.node_of_rank(7), 0);
  EXPECT_EQ(c.node_of_rank(8), 1);
  EXPECT_EQ(c.node_of_rank(16), 2);
  EXPECT_EQ(c.node_of_rank(19), 2);
  EXPECT_EQ(c.nvlink_domain_of_rank(16), 2);  // no domain spans nodes: the node
  EXPECT_EQ(c.node_group_index_of_rank(15), 0);
  EXPECT_EQ(c.node_group_index_of_rank(16), 1);
  EXPECT_EQ(c.group_of_rank(17).gpu.name, "A100-SXM-80GB");
  EXPECT_THROW(c.node_of_rank(20), std::out_of_range);
  EXPECT_THROW(c.node_of_rank(-1), std::out_of_range);
}

TEST(ClusterLayout, InterNodeBandwidthPerGpu) {
  Cluster c = two_groups();
  EXPECT_DOUBLE_EQ(inter_node_bandwidth_per_gpu_GBps(c.node_groups[0], c.network), 8 * 400 / 8.0 / 8);  // 50
  c.network.oversubscription = 2;
  EXPECT_DOUBLE_EQ(inter_node_bandwidth_per_gpu_GBps(c.node_groups[1], c.network), 4 * 200 / 8.0 / 4 / 2);
  c.node_groups[1].nics.count = 0;
  EXPECT_DOUBLE_EQ(inter_node_bandwidth_per_gpu_GBps(c.node_groups[1], c.network), 0);
}

TEST(StrategyNames, KeyReadsLikeTheHeaderExample) {
  Strategy s;
  s.tensor_model_parallel_size = 2;
  s.pipeline_model_parallel_size = 4;
  s.data_parallel_size = 4;
  s.sequence_parallel = true;
  s.zero_stage = 1;
  EXPECT_EQ(s.key(), "tp2.pp4.cp1.ep1.dp4.vpp1.sp.mbs1.z1.rc-none.1f1b");
  s.sequence_parallel = false;
  s.recompute = Recompute::selective;
  s.schedule = Schedule::interleaved_1f1b;
  s.virtual_pipeline_model_parallel_size = 2;
  EXPECT_EQ(s.key(), "tp2.pp4.cp1.ep1.dp4.vpp2.nosp.mbs1.z1.rc-selective.interleaved-1f1b");
  EXPECT_EQ(s.world_size(), 32);
}

TEST(StrategyNames, ScheduleAndRecomputeStringsRoundTrip) {
  for (const std::string& name : schedule_names()) EXPECT_EQ(to_string(*schedule_from_string(name)), name);
  for (const std::string& name : recompute_names()) EXPECT_EQ(to_string(*recompute_from_string(name)), name);
  EXPECT_EQ(schedule_from_string("double-strand"), Schedule::double_strand);
  EXPECT_EQ(schedule_from_string("1f1b"), Schedule::one_f_one_b);
  EXPECT_FALSE(schedule_from_string("zb-v").has_value());
  EXPECT_FALSE(recompute_from_string("partial").has_value());
}

}  // namespace
}  // namespace twin
