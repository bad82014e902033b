// A profile for the GPUs of a cluster: strict where the profile describes them, and, where the user asks for
// it, a copy of another GPU's kernel profile with its measured times scaled by datasheet ratios. Curves
// need no scaling: they are fractions of the pricing GPU's own peaks.
#include <cctype>

#include <fmt/format.h>

#include "cost/profile.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {

namespace {

std::string normalised_gpu(std::string_view name) {
  std::string out;
  for (unsigned char c : name)
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
  return out;
}

const GpuKernelProfile* described(const Profile& profile, const GpuSpec& gpu) {
  for (const GpuKernelProfile& g : profile.gpus)
    if (normalised_gpu(g.gpu) == normalised_gpu(gpu.name)) return &g;
  return nullptr;
}

bool compute_bound(const std::string& key) {
  return key.starts_with("gemm:") || key.starts_with("moe_router:") || key.starts_with("attention_");
}
bool fp8_gemm(const std::string& key) { return compute_bound(key) && key.find(",inputs=") != std::string::npos; }

}  // namespace

Profile profile_for_cluster(Profile profile, const Cluster& cluster, bool scale, const std::string& source,
                            const std::string& json_path_prefix, std::vector<std::string>* scaled) {
  std::vector<std::string> names;
  for (const GpuKernelProfile& g : profile.gpus) names.push_back(g.gpu);
  for (std::size_t i = 0; i < cluster.node_groups.size(); ++i) {
    const GpuSpec& gpu = cluster.node_groups[i].gpu;
    if (described(profile, gpu)) continue;
    if (!scale || profile.gpus.empty())
      throw InputError(source, fmt::format("{}/cluster/nodes/{}/gpu", json_path_prefix, i),
                       fmt::format("a GPU the profile '{}' describes, got {} (it describes: {}); pass --scale-profile "
                                   "to price {} from another GPU's measurements scaled by datasheet ratios",
                                   profile.name, gpu.name, join_names(names), gpu.name));
    const GpuKernelProfile* from = &profile.gpus.front();
    for (const GpuKernelProfile& g : profile.gpus)
      if (!gpu_family(g.gpu).empty() && gpu_family(g.gpu) == gpu_family(gpu.name)) {
        from = &g;
        break;
      }
    const std::optional<GpuSpec> from_spec = gpu_preset(from->gpu);
    if (!from_spec)
      throw InputError(source, fmt::format("{}/cluster/nodes/{}/gpu", json_path_prefix, i),
                       fmt::format("a GPU the profile '{}' describes, got {}: its closest kernel profile ({}) is not "
                                   "a GPU preset, so no datasheet ratio scales it",
                                   profile.name, gpu.name, from->gpu));
    const double compute_ratio = from_spec->peak_bf16_tflops / gpu.peak_bf16_tflops;
    // FP8 GEMMs by the FP8 peaks (where both GPUs state one; else as BF16's).
    const double fp8_ratio = from_spec->peak_fp8_tflops > 0 && gpu.peak_fp8_tflops > 0
                                 ? from_spec->peak_fp8_tflops / gpu.peak_fp8_tflops : compute_ratio;
    const double memory_ratio = from_spec->hbm_bandwidth_GBps / gpu.hbm_bandwidth_GBps;
    GpuKernelProfile copy = *from;
    copy.gpu = gpu.name;
    for (auto& [key, m] : copy.measured) {
      const double ratio = fp8_gemm(key) ? fp8_ratio : compute_bound(key) ? compute_ratio : memory_ratio;
      for (double* t : {&m.median_ns, &m.p10_ns, &m.p90_ns, &m.priced_ns, &m.benchmark_ns}) *t *= ratio;
    }
    index_measured_shapes(copy);
    if (scaled)
      scaled->push_back(fmt::format("{} priced from {}'s kernel profile: measured times x{:.3f} (bf16 peak {} / {} "
                                    "TFLOP/s) for GEMMs and attention, x{:.3f} (HBM {} / {} GB/s) for the rest",
                                    gpu.name, from->gpu, compute_ratio, from_spec->peak_bf16_tflops,
                                    gpu.peak_bf16_tflops, memory_ratio, from_spec->hbm_bandwidth_GBps,
                                    gpu.hbm_bandwidth_GBps));
    profile.gpus.push_back(std::move(copy));
  }
  return profile;
}

}  // namespace twin
