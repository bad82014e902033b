// The hardware a scenario runs on: GPU kinds (datasheet presets), nodes and their links, the network.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

struct GpuSpec {
  std::string name;
  double peak_bf16_tflops = 0;      // dense tensor-core bf16 with fp32 accumulation, datasheet
  double peak_fp8_tflops = 0;       // dense tensor-core fp8 with fp32 accumulation, datasheet; 0 = no FP8
  double peak_fp32_tflops = 0;      // non-tensor fp32
  double memory_GiB = 0;            // as the driver reports it (GiB)
  double hbm_bandwidth_GBps = 0;
  double nvlink_bandwidth_GBps = 0; // per GPU, per direction; 0 = no NVLink
  double pcie_bandwidth_GBps = 0;   // per direction
  int sm_count = 0;
  bool mxfp8 = false;               // tensor cores take MXFP8 (a scale per 32 elements): Blackwell
  bool operator==(const GpuSpec&) const = default;
};

enum class IntraNodeKind { nvswitch, nvlink, pcie };

struct IntraNodeLink {
  IntraNodeKind kind = IntraNodeKind::nvswitch;
  double bandwidth_GBps = 0;  // per GPU, per direction
  double latency_us = 0;
  bool operator==(const IntraNodeLink&) const = default;
};

struct Nics {
  int count = 0;               // per node
  double bandwidth_Gbps = 0;   // per NIC, per direction
  double latency_us = 0;       // 0 unless given: the profile's per-step inter-node latency applies alone
  bool operator==(const Nics&) const = default;
};

struct NodeGroup {
  int count = 0;               // nodes of this kind
  GpuSpec gpu;
  int gpus_per_node = 0;
  IntraNodeLink intra_node;
  Nics nics;
  // GPUs of one NVLink domain: consecutive nodes of the group whose GPUs reach each other over the intra-node
  // link (an NVL72 rack: 18 nodes of 4 GPUs on one NVLink switch system). 0: the node alone.
  int nvlink_domain_gpus = 0;
  int domain_gpus() const { return nvlink_domain_gpus > 0 ? nvlink_domain_gpus : gpus_per_node; }
  bool operator==(const NodeGroup&) const = default;
};

struct Network {
  std::string topology = "fat-tree";
  double oversubscription = 1.0;  // bisection divides inter-node bandwidth by this
  bool operator==(const Network&) const = default;
};

struct Cluster {
  std::vector<NodeGroup> node_groups;
  Network network;

  int total_gpus() const;
  int total_nodes() const;
  bool is_homogeneous() const { return node_groups.size() == 1; }
  // The node group of global GPU `rank` (ranks are numbered node group by node group, node by node).
  const NodeGroup& group_of_rank(int rank) const;
  int node_group_index_of_rank(int rank) const;
  // Global node index of `rank` (nodes numbered across node groups in order).
  int node_of_rank(int rank) const;
  // Global index of the NVLink domain `rank` is in (domains numbered across node groups in order): ranks of one
  // domain talk over the intra-node link, others over the NICs. The node, where no domain spans nodes.
  int nvlink_domain_of_rank(int rank) const;
  bool operator==(const Cluster&) const = default;
};

std::optional<GpuSpec> gpu_preset(std::string_view name);
std::vector<std::string> gpu_preset_names();
std::optional<IntraNodeKind> intra_node_kind_from_string(std::string_view name);
std::string to_string(IntraNodeKind kind);
std::vector<std::string> intra_node_kind_names();

// Of the node groups that global ranks [first_rank, first_rank + count) fall in: the one with the slowest
// GPUs (lowest bf16 peak, then least memory, then the first), and the smallest GPU memory. Ranks that run
// one graph in lockstep on a mixed cluster go at their slowest member's pace and fit its memory.
int slowest_node_group_of_ranks(const Cluster& cluster, int first_rank, int count);
double smallest_memory_GiB_of_ranks(const Cluster& cluster, int first_rank, int count);

// The link a node of `gpu` has when the scenario names none: NVSwitch at the GPU's NVLink bandwidth
// (2 us) for NVLink GPUs, else PCIe at its PCIe bandwidth (5 us).
IntraNodeLink default_intra_node(const GpuSpec& gpu);

// Per-GPU inter-node bandwidth in GB/s: the node's NICs shared by its GPUs, divided by oversubscription.
double inter_node_bandwidth_per_gpu_GBps(const NodeGroup& group, const Network& network);

}  // namespace twin
