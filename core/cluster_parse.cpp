// The cluster section of a scenario: node groups of GPUs (presets or explicit figures, each physical
// quantity within what hardware can be), their intra-node links and NICs, and the network.
#include "core/cluster_parse.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace twin {

namespace {

using Reader = JsonReader;

// A physical quantity within what hardware can be: a slip of orders of magnitude (or of units) is refused
// here, before it becomes a plan of 0.000 s or a clock beyond the simulator's horizon.
double physical(const Reader& r, double min, double max, std::string_view what) {
  return r.number(min, max, fmt::format("expected {} in [{:g}, {:g}]", what, min, max));
}

GpuSpec parse_gpu(const Reader& r) {
  auto preset_named = [](const Reader& name) {
    if (!name.value().is_string()) name.fail("expected a GPU preset name or an object of GPU fields");
    auto preset = gpu_preset(name.value().get<std::string>());
    if (!preset) {
      std::string message = fmt::format("unknown GPU {}", name.describe_value());
      if (auto near = closest_name(name.value().get<std::string>(), gpu_preset_names()))
        message += fmt::format(" (did you mean '{}'?)", *near);
      name.fail_plain(message + "; expected one of: " + join_names(gpu_preset_names()));
    }
    return *preset;
  };
  if (!r.value().is_object()) return preset_named(r);
  r.only_keys({"preset", "name", "peak_bf16_tflops", "peak_fp8_tflops", "peak_fp32_tflops", "memory_GiB",
               "hbm_bandwidth_GBps", "nvlink_bandwidth_GBps", "pcie_bandwidth_GBps", "sm_count", "mxfp8"});
  GpuSpec gpu;
  const auto preset = r.find("preset");
  if (preset) gpu = preset_named(*preset);
  const bool has_preset = preset.has_value();
  if (auto f = preset_field(r, "name", has_preset)) gpu.name = f->string();
  if (auto f = preset_field(r, "peak_bf16_tflops", has_preset)) gpu.peak_bf16_tflops = physical(*f, 1, 1e5, "a bf16 peak in TFLOP/s");
  if (auto f = r.find("peak_fp8_tflops")) {  // optional: a GPU without FP8 tensor cores has none
    constexpr const char* kExpected = "expected an fp8 peak in TFLOP/s in [1, 1e5], or 0 for none";
    gpu.peak_fp8_tflops = f->number(0, 1e5, kExpected);
    if (gpu.peak_fp8_tflops > 0 && gpu.peak_fp8_tflops < 1) f->fail(kExpected);
  }
  if (auto f = r.find("mxfp8")) gpu.mxfp8 = f->boolean();
  if (auto f = preset_field(r, "peak_fp32_tflops", has_preset)) gpu.peak_fp32_tflops = physical(*f, 0.1, 1e5, "an fp32 peak in TFLOP/s");
  if (auto f = preset_field(r, "memory_GiB", has_preset)) gpu.memory_GiB = physical(*f, 1, 1e5, "a memory size in GiB");
  if (auto f = preset_field(r, "hbm_bandwidth_GBps", has_preset)) gpu.hbm_bandwidth_GBps = physical(*f, 10, 1e6, "a memory bandwidth in GB/s");
  if (auto f = r.find("nvlink_bandwidth_GBps")) {
    constexpr const char* kExpected = "expected an NVLink bandwidth in GB/s in [1, 1e5], or 0 for none";
    gpu.nvlink_bandwidth_GBps = f->number(0, 1e5, kExpected);
    if (gpu.nvlink_bandwidth_GBps > 0 && gpu.nvlink_bandwidth_GBps < 1) f->fail(kExpected);
  }
  if (auto f = preset_field(r, "pcie_bandwidth_GBps", has_preset)) gpu.pcie_bandwidth_GBps = physical(*f, 1, 1e5, "a PCIe bandwidth in GB/s");
  if (auto f = preset_field(r, "sm_count", has_preset)) gpu.sm_count = static_cast<int>(f->integer(1, 100000));
  return gpu;
}

IntraNodeLink parse_intra_node(const Reader& r, const GpuSpec& gpu) {
  r.only_keys({"kind", "bandwidth_GBps", "latency_us"});
  IntraNodeLink link = default_intra_node(gpu);
  if (auto f = r.find("kind")) {
    link.kind = *intra_node_kind_from_string(f->one_of(intra_node_kind_names(), "intra-node link kind"));
    const bool nvlink = link.kind != IntraNodeKind::pcie;
    link.bandwidth_GBps = nvlink ? gpu.nvlink_bandwidth_GBps : gpu.pcie_bandwidth_GBps;
    link.latency_us = nvlink ? 2.0 : 5.0;
  }
  if (auto f = r.find("bandwidth_GBps")) link.bandwidth_GBps = physical(*f, 0.1, 1e5, "a link bandwidth in GB/s");
  if (auto f = r.find("latency_us")) link.latency_us = physical(*f, 0, 1e4, "a latency in microseconds");
  if (link.bandwidth_GBps <= 0)
    r.fail_plain(fmt::format("expected bandwidth_GBps, since GPU '{}' has no {} bandwidth", gpu.name,
                             to_string(link.kind)));
  return link;
}

Nics parse_nics(const Reader& r) {
  r.only_keys({"count", "bandwidth_Gbps", "latency_us"});
  Nics nics;
  nics.count = static_cast<int>(r.required("count").integer(0, 1024));
  if (nics.count > 0) nics.bandwidth_Gbps = physical(r.required("bandwidth_Gbps"), 1, 1e6, "a NIC bandwidth in Gb/s");
  else if (auto f = r.find("bandwidth_Gbps")) nics.bandwidth_Gbps = f->number(0, 1e6, "expected a bandwidth in Gb/s");
  if (auto f = r.find("latency_us")) nics.latency_us = physical(*f, 0, 1e4, "a latency in microseconds");
  return nics;
}

// GPUs of one NVLink domain: whole nodes over NVSwitch (the NVLink switch system of a rack), whole domains in the group.
int parse_nvlink_domain(const Reader& r, const NodeGroup& group) {
  const int gpus = static_cast<int>(r.integer(1, kMaxGpus));
  const std::int64_t group_gpus = std::int64_t{group.count} * group.gpus_per_node;
  if (gpus % group.gpus_per_node != 0 || group_gpus % gpus != 0)
    r.fail(fmt::format("expected a multiple of gpus_per_node {} dividing the group's {} GPUs", group.gpus_per_node,
                       group_gpus));
  if (gpus > group.gpus_per_node && group.intra_node.kind != IntraNodeKind::nvswitch)
    r.fail_plain("expected intra_node kind \"nvswitch\" for an NVLink domain of several nodes");
  return gpus;
}

}  // namespace

Cluster parse_cluster(const Reader& r) {
  r.only_keys({"nodes", "network"});
  Cluster cluster;
  const Reader nodes = r.required("nodes");
  std::int64_t total_gpus = 0;
  for (const Reader& item : nodes.non_empty_elements()) {
    item.only_keys({"count", "gpu", "gpus_per_node", "intra_node", "nics", "nvlink_domain_gpus"});
    NodeGroup group;
    group.count = static_cast<int>(item.required("count").integer(1, kMaxNodes));
    group.gpu = parse_gpu(item.required("gpu"));
    group.gpus_per_node = static_cast<int>(item.required("gpus_per_node").integer(1, kMaxGpusPerNode));
    if (auto f = item.find("intra_node")) group.intra_node = parse_intra_node(*f, group.gpu);
    else group.intra_node = default_intra_node(group.gpu);
    if (group.intra_node.bandwidth_GBps <= 0 && group.gpus_per_node > 1)
      item.fail_plain(fmt::format("expected an \"intra_node\" link, since GPU '{}' gives no link bandwidth",
                                  group.gpu.name));
    if (auto f = item.find("nics")) group.nics = parse_nics(*f);
    if (auto f = item.find("nvlink_domain_gpus")) group.nvlink_domain_gpus = parse_nvlink_domain(*f, group);
    total_gpus += std::int64_t{group.count} * group.gpus_per_node;
    if (total_gpus > kMaxGpus) nodes.fail_plain(fmt::format("expected at most {} GPUs in all", kMaxGpus));
    cluster.node_groups.push_back(std::move(group));
  }
  if (cluster.total_nodes() > 1) {
    const auto items = nodes.elements();
    for (std::size_t i = 0; i < items.size(); ++i)
      if (cluster.node_groups[i].nics.count == 0)
        (items[i].find("nics") ? *items[i].find("nics") : items[i])
            .fail_plain("expected \"nics\" with count >= 1, since the cluster has more than one node");
  }
  if (auto network = r.find("network")) {
    network->only_keys({"topology", "oversubscription"});
    if (auto f = network->find("topology")) cluster.network.topology = f->one_of({"fat-tree"}, "network topology");
    if (auto f = network->find("oversubscription"))
      cluster.network.oversubscription = physical(*f, 1, 1000, "an oversubscription ratio");
  }
  return cluster;
}

}  // namespace twin
