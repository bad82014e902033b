// Profiles as files and the choice of a GPU's kernel profile.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "calibrate/profile.hpp"
#include "core/error.hpp"

namespace twin {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("twin_test_profile_" + name);
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

TEST(BuiltinProfile, CoversEveryGpuPreset) {
  const Profile& p = load_profile("builtin");
  EXPECT_TRUE(p.builtin);
  for (const std::string& name : gpu_preset_names()) EXPECT_EQ(p.kernels_for(*gpu_preset(name)).gpu, name);
  EXPECT_DOUBLE_EQ(p.kernels_for(*gpu_preset("H200-141GB")).gemm.half_work, 1.5e9);
  EXPECT_DOUBLE_EQ(p.kernels_for(*gpu_preset("A800-80GB")).gemm.half_work, 5e8);
  EXPECT_DOUBLE_EQ(p.kernels_for(*gpu_preset("RTX-3090")).gemm.peak, 0.75);
  EXPECT_DOUBLE_EQ(p.intra_node.bandwidth.peak, 0.80);
  EXPECT_DOUBLE_EQ(p.link(LinkKind::intra_node, IntraNodeKind::pcie).bandwidth.peak, 0.75);
  EXPECT_DOUBLE_EQ(p.link(LinkKind::inter_node).latency_us, 5.0);
  EXPECT_DOUBLE_EQ(p.overlap.compute_slowdown, 1.10);
}

TEST(KernelsFor, ExactThenFamilyThenFirst) {
  Profile p = builtin_profile();
  p.gpus = {p.gpus[2], p.gpus[1]};  // A100-SXM-40GB, H200-141GB
  GpuSpec gpu = *gpu_preset("H100-SXM-80GB");
  EXPECT_EQ(p.kernels_for(gpu).gpu, "H200-141GB");  // same family: Hopper
  gpu.name = "a100 sxm 40gb";
  EXPECT_EQ(p.kernels_for(gpu).gpu, "A100-SXM-40GB");  // exact, ignoring case and punctuation
  gpu.name = "A800-80GB";
  EXPECT_EQ(p.kernels_for(gpu).gpu, "A100-SXM-40GB");
  gpu.name = "MI300X";
  EXPECT_EQ(p.kernels_for(gpu).gpu, "A100-SXM-40GB");  // unknown family: the first
  EXPECT_EQ(gpu_family("RTX-3080Ti"), "ampere-consumer");
  EXPECT_EQ(gpu_family("RTX-4090"), "ada");
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
  Measurement gemm{1500, 1400, 1600, 20};
  gemm.sm_clock_MHz = 1650;
  p.gpus[0].measured["gemm:m=1,n=2,k=3,count=1,ta=0,tb=0"] = gemm;
  save_profile(p, dir / "profile.json");
  const Profile loaded = load_profile((dir / "profile.json").string());
  EXPECT_DOUBLE_EQ(loaded.gpus[0].reference_sm_clock_MHz, 1590);
  EXPECT_DOUBLE_EQ(loaded.gpus[0].measured.at("gemm:m=1,n=2,k=3,count=1,ta=0,tb=0").sm_clock_MHz, 1650);
  EXPECT_EQ(to_json(loaded), to_json(p));
  // Profiles without clocks (before 2026-11-24) write no clock keys and read back as 0.
  const nlohmann::json plain = to_json(builtin_profile());
  EXPECT_FALSE(plain["gpus"][0].contains("reference_sm_clock_MHz"));
  nlohmann::json document = to_json(p);
  document["gpus"][0]["reference_sm_clock_MHz"] = 0;
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/reference_sm_clock_MHz", "expected an SM clock in MHz");
  document = to_json(p);
  document["gpus"][0]["measured"]["gemm:m=1,n=2,k=3,count=1,ta=0,tb=0"]["sm_clock_MHz"] = "fast";
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/measured/gemm:m=1,n=2,k=3,count=1,ta=0,tb=0/sm_clock_MHz",
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
  expect_load_error(dir / "p.json", "/gpus/0/gemm/peak", "expected a fraction in (0, 1]");
  document = to_json(builtin_profile());
  document["gpus"][0]["measured"]["gemm:m=1"] = {{"median_ns", 5}};
  write(dir / "p.json", document.dump());
  expect_load_error(dir / "p.json", "/gpus/0/measured/gemm:m=1", "missing required key 'p10_ns'");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace twin
