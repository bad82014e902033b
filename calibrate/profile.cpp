// Profiles as files: versioned JSON read with JsonReader (every error names file and JSON path), written
// atomically; and the choice of a GPU's kernel profile (exact name, else same family, else the first).
// Collective tables, first kept under provenance.collectives, are read from there too and moved up.
#include "calibrate/profile.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "calibrate/collective_tables.hpp"
#include "calibrate/shipped_profiles.hpp"
#include "calibrate/gemm_predictor.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_reader.hpp"

namespace twin {

namespace {

using nlohmann::json;
constexpr int kProfileVersion = 1;

std::string normalised(std::string_view name) {
  std::string out;
  for (unsigned char c : name)
    if (std::isalnum(c)) out += static_cast<char>(std::tolower(c));
  return out;
}

json efficiency_json(const SaturatingEfficiency& e) { return {{"peak", e.peak}, {"half_work", e.half_work}}; }

json link_json(const LinkProfile& l) {
  return {{"latency_us", l.latency_us}, {"bandwidth", efficiency_json(l.bandwidth)}};
}

SaturatingEfficiency read_efficiency(const JsonReader& r) {
  r.only_keys({"peak", "half_work"});
  return {r.required("peak").number(std::numeric_limits<double>::min(), 1.0, "expected a fraction in (0, 1]"),
          r.required("half_work").number(0, std::numeric_limits<double>::max(), "expected a number >= 0")};
}

LinkProfile read_link(const JsonReader& r) {
  r.only_keys({"latency_us", "bandwidth"});
  return {r.required("latency_us").number(0, 1e6, "expected a latency in microseconds >= 0"),
          read_efficiency(r.required("bandwidth"))};
}

Measurement read_measurement(const JsonReader& r) {
  r.only_keys({"median_ns", "p10_ns", "p90_ns", "samples"});
  const double max = std::numeric_limits<double>::max();
  Measurement m;
  m.median_ns = r.required("median_ns").number(0, max, "expected a time in ns >= 0");
  m.p10_ns = r.required("p10_ns").number(0, max, "expected a time in ns >= 0");
  m.p90_ns = r.required("p90_ns").number(0, max, "expected a time in ns >= 0");
  m.samples = r.required("samples").positive_int();
  return m;
}

GpuKernelProfile read_gpu(const JsonReader& r) {
  r.only_keys({"gpu", "gemm", "attention_forward", "attention_backward", "memory_bound", "launch_overhead_ns",
               "measured"});
  GpuKernelProfile g;
  g.gpu = r.required("gpu").string();
  g.gemm = read_efficiency(r.required("gemm"));
  g.attention_forward = read_efficiency(r.required("attention_forward"));
  g.attention_backward = read_efficiency(r.required("attention_backward"));
  g.memory_bound = read_efficiency(r.required("memory_bound"));
  g.launch_overhead_ns = r.required("launch_overhead_ns").number(0, 1e9, "expected a time in ns >= 0");
  if (auto measured = r.find("measured")) {
    measured->expect_object();
    for (const auto& item : measured->value().items()) {
      const JsonReader entry = *measured->find(item.key());
      g.measured.emplace(item.key(), read_measurement(entry));
    }
  }
  g.measured_gemms = index_measured_gemms(g.measured);
  return g;
}

}  // namespace

std::string gpu_family(std::string_view gpu_name) {
  const std::string name = normalised(gpu_name);
  auto has = [&](std::initializer_list<const char*> parts) {
    return std::any_of(parts.begin(), parts.end(), [&](const char* p) { return name.find(p) != std::string::npos; });
  };
  if (has({"h100", "h200", "h800", "h20"})) return "hopper";
  if (has({"4090", "4080", "4070", "4060", "l40", "ada"})) return "ada";
  if (has({"3090", "3080", "3070", "3060"})) return "ampere-consumer";
  if (has({"a100", "a800", "a40", "a30", "a10"})) return "ampere";
  return "";
}

const GpuKernelProfile& Profile::kernels_for(const GpuSpec& gpu) const {
  if (gpus.empty()) throw std::logic_error("profile '" + name + "' has no GPU kernel profiles");
  const std::string wanted = normalised(gpu.name);
  for (const GpuKernelProfile& g : gpus)
    if (normalised(g.gpu) == wanted) return g;
  const std::string family = gpu_family(gpu.name);
  if (!family.empty())
    for (const GpuKernelProfile& g : gpus)
      if (gpu_family(g.gpu) == family) return g;
  return gpus.front();
}

json to_json(const Profile& profile) {
  json gpus = json::array();
  for (const GpuKernelProfile& g : profile.gpus) {
    json measured = json::object();
    for (const auto& [key, m] : g.measured)
      measured[key] = {{"median_ns", m.median_ns}, {"p10_ns", m.p10_ns}, {"p90_ns", m.p90_ns}, {"samples", m.samples}};
    gpus.push_back({{"gpu", g.gpu},
                    {"gemm", efficiency_json(g.gemm)},
                    {"attention_forward", efficiency_json(g.attention_forward)},
                    {"attention_backward", efficiency_json(g.attention_backward)},
                    {"memory_bound", efficiency_json(g.memory_bound)},
                    {"launch_overhead_ns", g.launch_overhead_ns},
                    {"measured", measured}});
  }
  json out = {{"format", "twin-profile"},
              {"version", profile.version},
              {"name", profile.name},
              {"builtin", profile.builtin},
              {"provenance", profile.provenance.is_null() ? json::object() : profile.provenance},
              {"gpus", gpus},
              {"intra_node", link_json(profile.intra_node)},
              {"intra_node_pcie", link_json(profile.intra_node_pcie)},
              {"inter_node", link_json(profile.inter_node)},
              {"overlap",
               {{"compute_slowdown", profile.overlap.compute_slowdown},
                {"communication_slowdown", profile.overlap.communication_slowdown}}}};
  if (!profile.collectives.empty()) out["collectives"] = collective_tables_to_json(profile.collectives);
  return out;
}

Profile profile_from_json(const json& document, const std::string& source) {
  const JsonReader root(document, source);
  root.only_keys({"format", "version", "name", "builtin", "provenance", "gpus", "intra_node", "intra_node_pcie",
                  "inter_node", "overlap", "collectives"});
  const JsonReader format = root.required("format");
  if (format.value() != "twin-profile") format.fail("expected \"twin-profile\"");
  Profile p;
  const JsonReader version = root.required("version");
  if (version.value() != kProfileVersion) version.fail(fmt::format("expected profile format version {}", kProfileVersion));
  p.version = kProfileVersion;
  p.name = root.required("name").string();
  if (auto f = root.find("builtin")) p.builtin = f->boolean();
  if (auto f = root.find("provenance")) {
    f->expect_object();
    p.provenance = f->value();
  } else {
    p.provenance = json::object();
  }
  for (const JsonReader& g : root.required("gpus").non_empty_elements()) p.gpus.push_back(read_gpu(g));
  p.intra_node = read_link(root.required("intra_node"));
  p.inter_node = read_link(root.required("inter_node"));
  p.intra_node_pcie = read_link(root.required("intra_node_pcie"));
  const JsonReader overlap = root.required("overlap");
  overlap.only_keys({"compute_slowdown", "communication_slowdown"});
  p.overlap.compute_slowdown = overlap.required("compute_slowdown").number(1.0, 100.0, "expected a slowdown >= 1");
  p.overlap.communication_slowdown =
      overlap.required("communication_slowdown").number(1.0, 100.0, "expected a slowdown >= 1");
  if (auto collectives = root.find("collectives")) {
    p.collectives = collective_tables_from_json(*collectives);
  } else if (p.provenance.contains("collectives")) {
    const JsonReader provenance = *root.find("provenance");
    std::string gpu;
    if (auto preset = provenance.find("gpu_preset")) gpu = preset->string();
    p.collectives = legacy_collective_tables_from_json(provenance.required("collectives"), gpu);
    p.provenance.erase("collectives");
  }
  return p;
}

// Names "builtin", then a shipped measured profile ("h200-x4"), then a path.
Profile load_profile(const std::string& name_or_path) {
  if (name_or_path == "builtin") return builtin_profile();
  std::string text;
  std::string source = name_or_path;
  if (auto shipped = std::find_if(shipped_profiles().begin(), shipped_profiles().end(),
                                  [&](const ShippedProfile& p) { return p.name == name_or_path; });
      shipped != shipped_profiles().end()) {
    text = shipped->json;
    source = "builtin:" + name_or_path;
  } else {
    std::ifstream in(name_or_path, std::ios::binary);
    if (!in) {
      std::string names = "builtin";
      for (const ShippedProfile& p : shipped_profiles()) names += fmt::format(", {}", p.name);
      throw InputError(name_or_path, "", fmt::format("cannot open the file (expected a profile JSON path or one of: {})", names));
    }
    std::ostringstream read;
    read << in.rdbuf();
    text = read.str();
  }
  json document;
  try {
    document = json::parse(text);
  } catch (const json::parse_error& error) {
    throw InputError(source, "", fmt::format("malformed JSON (byte {}): {}", error.byte, error.what()));
  } catch (const json::exception& error) {  // e.g. a number too large for a double
    throw InputError(source, "", fmt::format("malformed JSON: {}", error.what()));
  }
  return profile_from_json(document, source);
}

void save_profile(const Profile& profile, const std::filesystem::path& path) {
  write_file_atomically(path, to_json(profile).dump(2) + "\n");
}

}  // namespace twin
