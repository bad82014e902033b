// algbw and busbw are recomputed from size and time rather than copied: nccl-tests prints them with two
// decimals, so small sizes read as 0.00 GB/s, which a profile cannot hold (its rows are positive).
#include "calibrate/nccl_tests_import.hpp"

#include <map>

#include <fmt/format.h>

#include "cost/collective_tables.hpp"
#include "core/device_names.hpp"
#include "calibrate/model_fit.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {
namespace {

std::string gpu_of(const NcclTestsRun& run, const std::optional<std::string>& gpu) {
  const NcclTestsRank& first = run.ranks.front();
  for (const NcclTestsRank& rank : run.ranks)
    if (rank.device != first.device)
      throw InputError(run.file, "", fmt::format("line {}: device \"{}\" differs from rank 0's \"{}\": a table holds one "
                                                 "kind of GPU", rank.line, rank.device, first.device));
  if (gpu) {
    if (!gpu_preset(*gpu))
      throw InputError(run.file, "", fmt::format("--gpu {}: expected a GPU preset: {}", *gpu,
                                                 join_names(gpu_preset_names())));
    return gpu_preset(*gpu)->name;
  }
  if (auto preset = gpu_preset_for_device_name(first.device)) return *preset;
  throw InputError(run.file, "", fmt::format("line {}: no GPU preset matches device \"{}\"; give --gpu with one of: {}",
                                             first.line, first.device, join_names(gpu_preset_names())));
}

std::string placement(const CollectiveTable& t) {
  return fmt::format("{} over {} GPUs ({} per node, {} node{}) on {}", to_string(t.collective), t.group_size, t.ranks_per_node, t.nodes, t.nodes == 1 ? "" : "s", t.gpu);
}

}  // namespace

CollectiveTable collective_table_from_run(const NcclTestsRun& run, const std::optional<std::string>& gpu) {
  CollectiveTable t;
  t.gpu = gpu_of(run, gpu);
  t.collective = run.collective;
  t.group_size = static_cast<int>(run.ranks.size());
  std::map<std::string, int> per_host;
  for (const NcclTestsRank& rank : run.ranks) ++per_host[rank.host];
  t.nodes = static_cast<int>(per_host.size());
  t.ranks_per_node = t.group_size / t.nodes;
  for (const auto& [host, count] : per_host)
    if (count != t.ranks_per_node)
      throw InputError(run.file, "", fmt::format("line {}: host {} runs {} of the {} ranks, and twin's tables describe "
                                                 "groups spread evenly ({} hosts)",
                                                 run.ranks.front().line, host, count, t.group_size, t.nodes));
  const GpuSpec spec = *gpu_preset(t.gpu);
  // As twin calibrate: a fraction of the NVLink bandwidth, or of PCIe where the GPU has no NVLink.
  t.nominal_bandwidth_GBps = spec.nvlink_bandwidth_GBps > 0 ? spec.nvlink_bandwidth_GBps : spec.pcie_bandwidth_GBps;
  const double factor = busbw_factor(t.collective, t.group_size);
  std::vector<double> sizes, times;
  for (const NcclTestsRow& row : run.rows) {
    CollectivePoint p;
    p.size_bytes = row.size_bytes;
    p.time_us = row.time_us;
    p.algbw_GBps = static_cast<double>(row.size_bytes) / row.time_us / 1e3;  // bytes/us = MB/s
    p.busbw_GBps = p.algbw_GBps * factor;
    t.points.push_back(p);
    sizes.push_back(static_cast<double>(row.size_bytes));
    times.push_back(row.time_us);
  }
  const AffineFit fit = fit_affine_relative(sizes, times);
  if (!(fit.slope > 0))
    throw InputError(run.file, "", fmt::format("line {}: the times do not grow with size, so no bandwidth can be fitted",
                                               run.first_line));
  t.fit = link_profile_from_fit(fit, algorithm_steps(t.collective, t.group_size), factor, t.nominal_bandwidth_GBps);
  // The profile reader holds fits to [0.001, 10] x nominal: beyond, the log is not of this GPU's links.
  if (t.fit.bandwidth.peak < 1e-3 || t.fit.bandwidth.peak > 10)
    throw InputError(run.file, "", fmt::format("line {}: the fitted bus bandwidth is {:.3g} x the {} GB/s of {}'s links, "
                                               "outside [0.001, 10]: is the GPU right (--gpu)?",
                                               run.first_line, t.fit.bandwidth.peak, t.nominal_bandwidth_GBps, t.gpu));
  return t;
}

NcclTestsFold fold_nccl_tests(Profile profile, const std::vector<NcclTestsRun>& runs,
                              const std::optional<std::string>& gpu) {
  NcclTestsFold out;
  std::vector<CollectiveTable> tables;
  std::vector<const NcclTestsRun*> sources;
  for (const NcclTestsRun& run : runs) {
    CollectiveTable t = collective_table_from_run(run, gpu);
    for (std::size_t i = 0; i < tables.size(); ++i)
      if (tables[i].gpu == t.gpu && tables[i].collective == t.collective && tables[i].group_size == t.group_size &&
          tables[i].ranks_per_node == t.ranks_per_node && tables[i].nodes == t.nodes)
        throw InputError(run.file, "", fmt::format("line {}: a second {} (the first: {} line {})", run.first_line,
                                                   placement(t), sources[i]->file, sources[i]->first_line));
    tables.push_back(std::move(t));
    sources.push_back(&run);
  }

  if (!profile.provenance.is_object()) {
    nlohmann::json earlier = std::move(profile.provenance);
    profile.provenance = nlohmann::json::object();
    if (!earlier.is_null()) profile.provenance["earlier"] = std::move(earlier);
  }
  nlohmann::json& record = profile.provenance["nccl_tests"];
  if (!record.is_array()) record = nlohmann::json::array();
  for (std::size_t i = 0; i < tables.size(); ++i) {
    const CollectiveTable& t = tables[i];
    const NcclTestsRun& run = *sources[i];
    const CollectiveTable* existing =
        find_collective_table(profile.collectives, t.gpu, t.collective, t.group_size, t.ranks_per_node, t.nodes);
    const CollectivePoint& last = t.points.back();
    out.summary.push_back(fmt::format("{}: {} sizes, {} B to {} B, busbw {:.1f} GB/s at the largest; {} ({}, line {})",
                                      placement(t), t.points.size(), t.points.front().size_bytes, last.size_bytes,
                                      last.busbw_GBps, existing ? "replaced" : "added", run.file, run.first_line));
    record.push_back({{"log", run.file}, {"line", run.first_line}, {"test", run.test.empty() ? "" : run.test},
                      {"collective", to_string(t.collective)}, {"collective_from", run.collective_from},
                      {"gpu", t.gpu}, {"device", run.ranks.front().device}, {"group_size", t.group_size},
                      {"ranks_per_node", t.ranks_per_node}, {"nodes", t.nodes}, {"rows", t.points.size()}});
    if (existing) profile.collectives[existing - profile.collectives.data()] = t;
    else profile.collectives.push_back(t);
  }
  profile.builtin = false;
  out.profile = std::move(profile);
  return out;
}

}  // namespace twin
