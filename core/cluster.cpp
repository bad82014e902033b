// GPU presets from NVIDIA datasheets, default intra-node links, and rank placement over node groups.
// Memory is what the driver reports (nvidia-smi's total, MiB / 1024): marketed "80 GB" HBM is 80 GiB of
// which the driver reserves a little on Hopper (81559 MiB on this workplace's H100 machines).
#include "core/cluster.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

namespace twin {

namespace {

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

GpuSpec gpu(std::string name, double bf16_tflops, double fp8_tflops, double fp32_tflops, double memory_MiB,
            double hbm_GBps, double nvlink_GBps, double pcie_GBps, int sms, bool mxfp8 = false) {
  return GpuSpec{std::move(name), bf16_tflops, fp8_tflops, fp32_tflops, memory_MiB / 1024.0, hbm_GBps, nvlink_GBps,
                 pcie_GBps, sms, mxfp8};
}

// bf16 and fp8 dense tensor TFLOP/s with fp32 accumulation (GeForce cards run that at half their fp16-accumulate
// rate; datasheets that state "with sparsity" are halved; 0: no FP8 tensor cores); NVLink per direction (H100/H200
// 900 GB/s and A100 600 GB/s bidirectional; A800 400; NVLink 5 1.8 TB/s); PCIe Gen5 x16 64 GB/s, Gen4 x16 32 GB/s,
// Gen6 x16 128 GB/s per direction. RTX-3090's NVLink bridge is ignored. Sources per number: docs/PROFILES.md,
// "GPU presets and their sources". Blackwell memory: B200's and GB200's as nvidia-smi reports them (183359 and
// 189471 MiB); GB300's 288 GB at the same reported share (an estimate: no GB300 was at hand).
const std::vector<GpuSpec>& presets() {
  static const std::vector<GpuSpec> all = {
      gpu("H100-SXM-80GB", 989.4, 1978.9, 67.0, 81559, 3350, 450, 64, 132),
      gpu("H200-141GB", 989.4, 1978.9, 67.0, 143771, 4800, 450, 64, 132),
      gpu("A100-SXM-40GB", 312.0, 0, 19.5, 40960, 1555, 300, 32, 108),
      gpu("A100-SXM-80GB", 312.0, 0, 19.5, 81920, 2039, 300, 32, 108),
      gpu("A800-80GB", 312.0, 0, 19.5, 81920, 2039, 200, 32, 108),
      gpu("RTX-4090", 165.2, 330.3, 82.6, 24564, 1008, 0, 32, 128),
      gpu("RTX-3090", 71.0, 0, 35.6, 24576, 936, 0, 32, 82),
      gpu("RTX-3080Ti", 68.2, 0, 34.1, 12288, 912, 0, 32, 80),
      gpu("B200", 2250, 4500, 75, 183359, 7700, 900, 64, 148, true),
      gpu("GB200", 2500, 5000, 80, 189471, 8000, 900, 64, 148, true),
      gpu("GB300", 2500, 5000, 80, 293371, 8000, 900, 128, 160, true),
  };
  return all;
}

}  // namespace

int Cluster::total_gpus() const {
  int total = 0;
  for (const NodeGroup& group : node_groups) total += group.count * group.gpus_per_node;
  return total;
}

int Cluster::total_nodes() const {
  int total = 0;
  for (const NodeGroup& group : node_groups) total += group.count;
  return total;
}

int Cluster::node_group_index_of_rank(int rank) const {
  if (rank < 0) throw std::out_of_range("rank " + std::to_string(rank) + " is negative");
  int first_rank = 0;
  for (std::size_t i = 0; i < node_groups.size(); ++i) {
    const int group_gpus = node_groups[i].count * node_groups[i].gpus_per_node;
    if (rank < first_rank + group_gpus) return static_cast<int>(i);
    first_rank += group_gpus;
  }
  throw std::out_of_range("rank " + std::to_string(rank) + " is beyond the cluster's " +
                          std::to_string(first_rank) + " GPUs");
}

const NodeGroup& Cluster::group_of_rank(int rank) const { return node_groups[node_group_index_of_rank(rank)]; }

int Cluster::node_of_rank(int rank) const {
  const int index = node_group_index_of_rank(rank);
  int first_rank = 0;
  int first_node = 0;
  for (int i = 0; i < index; ++i) {
    first_rank += node_groups[i].count * node_groups[i].gpus_per_node;
    first_node += node_groups[i].count;
  }
  return first_node + (rank - first_rank) / node_groups[index].gpus_per_node;
}

int Cluster::nvlink_domain_of_rank(int rank) const {
  const int index = node_group_index_of_rank(rank);
  int first_rank = 0;
  int first_domain = 0;
  for (int i = 0; i < index; ++i) {
    const int group_gpus = node_groups[i].count * node_groups[i].gpus_per_node;
    first_rank += group_gpus;
    first_domain += (group_gpus + node_groups[i].domain_gpus() - 1) / node_groups[i].domain_gpus();
  }
  return first_domain + (rank - first_rank) / node_groups[index].domain_gpus();
}

int slowest_node_group_of_ranks(const Cluster& cluster, int first_rank, int count) {
  const int first_group = cluster.node_group_index_of_rank(first_rank);
  const int last_group = cluster.node_group_index_of_rank(first_rank + std::max(count, 1) - 1);
  int slowest = first_group;
  for (int g = first_group + 1; g <= last_group; ++g) {
    const GpuSpec& a = cluster.node_groups[g].gpu;
    const GpuSpec& b = cluster.node_groups[slowest].gpu;
    if (a.peak_bf16_tflops < b.peak_bf16_tflops ||
        (a.peak_bf16_tflops == b.peak_bf16_tflops && a.memory_GiB < b.memory_GiB))
      slowest = g;
  }
  return slowest;
}

double smallest_memory_GiB_of_ranks(const Cluster& cluster, int first_rank, int count) {
  const int first_group = cluster.node_group_index_of_rank(first_rank);
  const int last_group = cluster.node_group_index_of_rank(first_rank + std::max(count, 1) - 1);
  double smallest = cluster.node_groups[first_group].gpu.memory_GiB;
  for (int g = first_group + 1; g <= last_group; ++g) smallest = std::min(smallest, cluster.node_groups[g].gpu.memory_GiB);
  return smallest;
}

std::optional<GpuSpec> gpu_preset(std::string_view name) {
  const std::string wanted = lowercase(name);
  for (const GpuSpec& spec : presets())
    if (lowercase(spec.name) == wanted) return spec;
  return std::nullopt;
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const GpuSpec& spec : presets()) names.push_back(spec.name);
  return names;
}

std::optional<IntraNodeKind> intra_node_kind_from_string(std::string_view name) {
  const std::string wanted = lowercase(name);
  if (wanted == "nvswitch") return IntraNodeKind::nvswitch;
  if (wanted == "nvlink") return IntraNodeKind::nvlink;
  if (wanted == "pcie") return IntraNodeKind::pcie;
  return std::nullopt;
}

std::string to_string(IntraNodeKind kind) {
  switch (kind) {
    case IntraNodeKind::nvswitch: return "nvswitch";
    case IntraNodeKind::nvlink: return "nvlink";
    case IntraNodeKind::pcie: return "pcie";
  }
  return "unknown";
}

std::vector<std::string> intra_node_kind_names() { return {"nvswitch", "nvlink", "pcie"}; }

IntraNodeLink default_intra_node(const GpuSpec& gpu) {
  if (gpu.nvlink_bandwidth_GBps > 0) return IntraNodeLink{IntraNodeKind::nvswitch, gpu.nvlink_bandwidth_GBps, 2.0};
  return IntraNodeLink{IntraNodeKind::pcie, gpu.pcie_bandwidth_GBps, 5.0};
}

double inter_node_bandwidth_per_gpu_GBps(const NodeGroup& group, const Network& network) {
  if (group.nics.count <= 0 || group.gpus_per_node <= 0) return 0;
  const double node_GBps = group.nics.count * group.nics.bandwidth_Gbps / 8.0;
  return node_GBps / group.gpus_per_node / network.oversubscription;
}

}  // namespace twin
