// Profiles as files and the choice of a GPU's kernel profile.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cost/profile.hpp"
#include "core/error.hpp"
#include "tests/scratch_path.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = test::scratch_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// Loads `path` expecting an InputError at `json_path` whose message contains `expected`.
void expect_load_error(const fs::path& path, const std::string& json_path, const std::string& expected) {
  try {
    load_profile(path.string());
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path.string());
    EXPECT_EQ(e.json_path(), json_path) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(BuiltinProfile, CoversEveryGpuPresetFromItsSources) {
  const Profile& p = load_profile("builtin");
  EXPECT_TRUE(p.builtin);
  // Every preset but Blackwell's: no Blackwell kernel was measured, so a Blackwell GPU is priced only through
  // --scale-profile (from the H100's kernels, scaled by datasheet ratios), which the report then says.
  for (const std::string& name : gpu_preset_names()) {
    if (gpu_family(name) == "blackwell")
      EXPECT_THROW(p.kernels_for(*gpu_preset(name)), InputError) << name;
    else
      EXPECT_EQ(p.kernels_for(*gpu_preset(name)).gpu, name);
  }
  // Hopper: the shipped measured profiles' GEMMs and memory-bound kernels, attention from the cuDNN and
  // FlashAttention-2 measurements instead of twin's own kernel, the fitted in-training factor; GEMMs priced at
  // the clock of the prices the factor was fitted (H100: h100-x1's reference clock) or scaled (H200: the clock of
  // h200-x1 of 2026-11-25, against which its GEMMs' in-training ratio was measured) against, whatever clock the
  // shipped calibration held.
  EXPECT_EQ(p.kernels_for(*gpu_preset("H100-SXM-80GB")).sustained_sm_clock_MHz,
            load_profile("h100-x1").gpus.front().reference_sm_clock_MHz);
  EXPECT_NEAR(p.kernels_for(*gpu_preset("H200-141GB")).sustained_sm_clock_MHz, 1686.2, 0.1);
  for (const char* name : {"H100-SXM-80GB", "H200-141GB"}) {
    const GpuKernelProfile& hopper = p.kernels_for(*gpu_preset(name));
    EXPECT_FALSE(hopper.attention_at_reference_clock) << name;
    EXPECT_EQ(hopper.measured_gemms.size(), 4243u) << name;
    EXPECT_FALSE(hopper.measured_kernels.empty()) << name;
    for (const auto& [key, m] : hopper.measured) EXPECT_FALSE(key.starts_with("attention_")) << key;
    EXPECT_GT(hopper.fused_attention_forward.peak, 2 * hopper.attention_forward.peak) << name;
    EXPECT_GT(hopper.in_situ_prior.gemm, 1.1) << name;
  }
  EXPECT_DOUBLE_EQ(p.kernels_for(*gpu_preset("H100-SXM-80GB")).in_situ_prior.gemm, 1.2723);
  // Ampere: published peaks and the in-training factor fitted on every A100 group of the published table.
  const GpuKernelProfile& a800 = p.kernels_for(*gpu_preset("A800-80GB"));
  EXPECT_DOUBLE_EQ(a800.gemm.peak, 0.869);
  EXPECT_DOUBLE_EQ(a800.gemm.half_work, 5e9);
  EXPECT_DOUBLE_EQ(a800.in_situ_prior.attention, 1.2897);
  EXPECT_DOUBLE_EQ(p.kernels_for(*gpu_preset("A100-SXM-40GB")).memory_bound.peak, 0.886);
  EXPECT_DOUBLE_EQ(p.kernels_for(*gpu_preset("RTX-3090")).gemm.peak, 0.75);
  // Links at published bus bandwidths (NCCL's model takes the latency), overlap measured on 4 H200s,
  // collectives over 2-4 H200s measured.
  EXPECT_DOUBLE_EQ(p.intra_node.bandwidth.peak, 0.80);
  EXPECT_DOUBLE_EQ(p.link(LinkKind::intra_node, IntraNodeKind::pcie).bandwidth.peak, 0.75);
  EXPECT_DOUBLE_EQ(p.link(LinkKind::inter_node).bandwidth.peak, 0.90);
  EXPECT_NEAR(p.overlap.compute_slowdown, 1.262, 1e-3);
  EXPECT_FALSE(p.collectives.empty());
}

TEST(KernelsFor, MatchesTheNameOnlyAndNamesWhatTheProfileDescribes) {
  Profile p = builtin_profile();
  p.gpus = {p.gpus[2], p.gpus[1]};  // A100-SXM-40GB, H200-141GB
  GpuSpec gpu = *gpu_preset("A100-SXM-40GB");
  gpu.name = "a100 sxm 40gb";
  EXPECT_EQ(p.kernels_for(gpu).gpu, "A100-SXM-40GB");  // exact, ignoring case and punctuation
  try {
    p.kernels_for(*gpu_preset("H100-SXM-80GB"));
    ADD_FAILURE() << "a GPU the profile does not describe was priced";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("H100-SXM-80GB (the profile describes: A100-SXM-40GB, H200-141GB)"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(gpu_family("RTX-3080Ti"), "ampere-consumer");
  EXPECT_EQ(gpu_family("RTX-4090"), "ada");
}

TEST(ProfileForCluster, AGpuTheProfileDoesNotDescribeIsAnErrorUnlessScalingIsAsked) {
  const Profile h100 = load_profile("h100-x1");
  Cluster cluster;
  NodeGroup group;
  group.count = 1;
  group.gpus_per_node = 8;
  group.gpu = *gpu_preset("A100-SXM-80GB");
  cluster.node_groups = {group};
  try {
    profile_for_cluster(h100, cluster, false, "s.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "s.json");
    EXPECT_EQ(e.json_path(), "/cluster/nodes/0/gpu");
    EXPECT_NE(std::string(e.what()).find("A100-SXM-80GB (it describes: H100-SXM-80GB); pass --scale-profile"),
              std::string::npos) << e.what();
  }
  std::vector<std::string> notes;
  const Profile scaled = profile_for_cluster(h100, cluster, true, "s.json", "", &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("A100-SXM-80GB priced from H100-SXM-80GB"), std::string::npos) << notes[0];
  // A measured GEMM takes the ratio of bf16 peaks (989.4 / 312), a memory-bound kernel that of HBM (3350 / 2039).
  const GpuKernelProfile& from = h100.kernels_for(*gpu_preset("H100-SXM-80GB"));
  const GpuKernelProfile& to = scaled.kernels_for(group.gpu);
  const std::string gemm = "gemm:m=4096,n=4096,k=4096,count=1,ta=0,tb=0";
  ASSERT_TRUE(from.measured.contains(gemm));
  EXPECT_NEAR(to.measured.at(gemm).median_ns, from.measured.at(gemm).median_ns * 989.4 / 312, 1e-6);
  const auto norm = std::find_if(from.measured.begin(), from.measured.end(),
                                 [](const auto& e) { return e.first.starts_with("norm_forward:"); });
  ASSERT_NE(norm, from.measured.end());
  EXPECT_NEAR(to.measured.at(norm->first).median_ns, norm->second.median_ns * 3350 / 2039, 1e-6);
}

TEST(ProfileFiles, SaveLoadRoundTripLeavesNoTemporary) {
  const fs::path dir = fresh_dir("roundtrip");
  Profile p = builtin_profile();
  p.name = "measured";
  p.builtin = false;
  p.gpus[0].measured["gemm:m=1,n=2,k=3,count=1,ta=0,tb=0"] = {1500.5, 1400, 1600, 20};
  p.provenance = {{"host", "test"}};
  save_profile(p, dir / "profile.json");
  EXPECT_TRUE(fs::exists(dir / "profile.json"));
  EXPECT_FALSE(fs::exists(dir / "profile.json.tmp"));
  const Profile loaded = load_profile((dir / "profile.json").string());
  EXPECT_EQ(to_json(loaded), to_json(p));
  EXPECT_DOUBLE_EQ(loaded.gpus[0].measured.at("gemm:m=1,n=2,k=3,count=1,ta=0,tb=0").median_ns, 1500.5);
  EXPECT_EQ(loaded.name, "measured");
  fs::remove_all(dir);
}

TEST(ProfileFiles, SmClocksRoundTripAndAreChecked) {
  const fs::path dir = fresh_dir("clocks");
  Profile p = builtin_profile();
  p.gpus[0].reference_sm_clock_MHz = 1590;
  p.gpus[0].sustained_sm_clock_MHz = 1440;
  p.gpus[0].attention_at_reference_clock = true;
  Measurement gemm{1500, 1400, 1600, 20};
  gemm.sm_clock_MHz = 1650;
  p.gpus[0].measured["gemm:m=1,n=2,k=3,count=1,ta=0,tb=0"] = gemm;
  save_profile(p, dir / "profile.json");
  const Profile loaded = load_profile((dir / "profile.json").string());
  EXPECT_DOUBLE_EQ(loaded.gpus[0].reference_sm_clock_MHz, 1590);
  EXPECT_DOUBLE_EQ(loaded.gpus[0].sustained_sm_clock_MHz, 1440);
  EXPECT_TRUE(loaded.gpus[0].attention_at_reference_clock);
  EXPECT_DOUBLE_EQ(loaded.gpus[0].measured.at("gemm:m=1,n=2,k=3,count=1,ta=0,tb=0").sm_clock_MHz, 1650);
  EXPECT_EQ(to_json(loaded), to_json(p));
  // Profiles without clocks (before 2026-11-24) write no clock keys and read back as 0.
  const nlohmann::json plain = to_json(builtin_profile());
  EXPECT_FALSE(plain["gpus"][2].contains("reference_sm_clock_MHz"));  // the built-in A100: curves, no clock
  EXPECT_FALSE(plain["gpus"][0].contains("attention_at_reference_clock"));
  nlohmann::json document = to_json(p);
  document["gpus"][0]["reference_sm_clock_MHz"] = 0;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/reference_sm_clock_MHz", "expected an SM clock in MHz");
  document = to_json(p);
  document["gpus"][0]["sustained_sm_clock_MHz"] = -1440;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/sustained_sm_clock_MHz", "expected an SM clock in MHz");
  document = to_json(p);
  document["gpus"][0]["attention_at_reference_clock"] = "yes";
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/attention_at_reference_clock", "expected true or false");
  document = to_json(p);
  document["gpus"][0].erase("reference_sm_clock_MHz");
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/attention_at_reference_clock", "without reference_sm_clock_MHz");
  document = to_json(p);
  document["gpus"][0]["measured"]["gemm:m=1,n=2,k=3,count=1,ta=0,tb=0"]["sm_clock_MHz"] = "fast";
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/measured/gemm:m=1,n=2,k=3,count=1,ta=0,tb=0/sm_clock_MHz",
                    "expected an SM clock in MHz");
  // A trace entry's run clock round-trips; on a micro-benchmark, or out of range, it is refused.
  Measurement traced{1800, 1700, 1900, 4, "trace:run", 1500, 1500};
  traced.run_sm_clock_MHz = 1545;
  p.gpus[0].measured["gemm:m=2,n=2,k=3,count=1,ta=0,tb=0"] = traced;
  save_profile(p, dir / "traced.json");
  const Profile traced_back = load_profile((dir / "traced.json").string());
  EXPECT_DOUBLE_EQ(traced_back.gpus[0].measured.at("gemm:m=2,n=2,k=3,count=1,ta=0,tb=0").run_sm_clock_MHz, 1545);
  document = to_json(p);
  document["gpus"][0]["measured"]["gemm:m=1,n=2,k=3,count=1,ta=0,tb=0"]["run_sm_clock_MHz"] = 1545;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/measured/gemm:m=1,n=2,k=3,count=1,ta=0,tb=0/run_sm_clock_MHz",
                    "only on an entry with a source");
  document = to_json(p);
  document["gpus"][0]["measured"]["gemm:m=2,n=2,k=3,count=1,ta=0,tb=0"]["run_sm_clock_MHz"] = 0;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/measured/gemm:m=2,n=2,k=3,count=1,ta=0,tb=0/run_sm_clock_MHz",
                    "expected an SM clock in MHz");
  fs::remove_all(dir);
}

TEST(ProfileFiles, MissingFile) { expect_load_error("/nonexistent/profile.json", "", "cannot open"); }

TEST(ProfileFiles, CorruptFile) {
  const fs::path dir = fresh_dir("corrupt");
  write(dir / "p.json", "{\"format\": \"twin-profile\", \"version\": 1,");
  expect_load_error(dir / "p.json", "", "malformed JSON");
  fs::remove_all(dir);
}

TEST(ProfileFiles, PartialFileNamesTheMissingField) {
  const fs::path dir = fresh_dir("partial");
  nlohmann::json document = to_json(builtin_profile());
  document["gpus"][3].erase("gemm");
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/3", "missing required key 'gemm'");
  document = to_json(builtin_profile());
  document.erase("overlap");
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "", "missing required key 'overlap'");
  document = to_json(builtin_profile());
  document["version"] = 2;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/version", "expected profile format version 1, got 2");
  document = to_json(builtin_profile());
  document["gpus"][0]["gemm"]["peak"] = 1.5;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/gemm/peak", "expected a fraction of the peak in [0.001, 1]");
  document = to_json(builtin_profile());
  document["gpus"][0]["measured"]["gemm:m=1"] = {{"median_ns", 5}};
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/measured/gemm:m=1", "missing required key 'p10_ns'");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace twin
