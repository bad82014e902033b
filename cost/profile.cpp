// Profiles as files: versioned JSON read with JsonReader (every error names file and JSON path), written
// atomically; and the choice of a GPU's kernel profile (exact name, else same family, else the first).
// Collective tables, first kept under provenance.collectives, are read from there too and moved up.
#include "cost/profile.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "cost/collective_tables.hpp"
#include "cost/shipped_profiles.hpp"
#include "cost/gemm_predictor.hpp"
#include "cost/in_situ.hpp"
#include "cost/kernel_predictor.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
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
  return {r.required("peak").number(1e-3, 1.0, "expected a fraction of the peak in [0.001, 1]"),
          r.required("half_work").number(0, std::numeric_limits<double>::max(), "expected a number >= 0")};
}

LinkProfile read_link(const JsonReader& r) {
  r.only_keys({"latency_us", "bandwidth"});
  return {r.required("latency_us").number(0, 1e6, "expected a latency in microseconds >= 0"),
          read_efficiency(r.required("bandwidth"))};
}

Measurement read_measurement(const JsonReader& r) {
  r.only_keys({"median_ns", "p10_ns", "p90_ns", "samples", "source", "priced_ns", "benchmark_ns", "sm_clock_MHz",
               "run_sm_clock_MHz"});
  const double max = std::numeric_limits<double>::max();
  Measurement m;
  m.median_ns = r.required("median_ns").number(0, max, "expected a time in ns >= 0");
  m.p10_ns = r.required("p10_ns").number(0, max, "expected a time in ns >= 0");
  m.p90_ns = r.required("p90_ns").number(0, max, "expected a time in ns >= 0");
  m.samples = r.required("samples").positive_int();
  if (auto source = r.find("source")) m.source = source->string();
  for (auto [name, field] : {std::pair{"priced_ns", &m.priced_ns}, std::pair{"benchmark_ns", &m.benchmark_ns}})
    if (auto value = r.find(name)) {
      if (m.source.empty()) value->fail(fmt::format("expected {} only on an entry with a source (a trace)", name));
      *field = value->number(0, max, "expected a time in ns >= 0");
    }
  if (auto clock = r.find("run_sm_clock_MHz")) {
    if (m.source.empty()) clock->fail("expected run_sm_clock_MHz only on an entry with a source (a trace)");
    m.run_sm_clock_MHz = clock->number(1, 1e5, "expected an SM clock in MHz");
  }
  if (auto clock = r.find("sm_clock_MHz")) m.sm_clock_MHz = clock->number(1, 1e5, "expected an SM clock in MHz");
  return m;
}

json measurement_json(const Measurement& m) {
  json out = {{"median_ns", m.median_ns}, {"p10_ns", m.p10_ns}, {"p90_ns", m.p90_ns}, {"samples", m.samples}};
  if (!m.source.empty()) out["source"] = m.source;
  if (m.priced_ns > 0) out["priced_ns"] = m.priced_ns;
  if (m.benchmark_ns > 0) out["benchmark_ns"] = m.benchmark_ns;
  if (m.sm_clock_MHz > 0) out["sm_clock_MHz"] = m.sm_clock_MHz;
  if (m.run_sm_clock_MHz > 0) out["run_sm_clock_MHz"] = m.run_sm_clock_MHz;
  return out;
}

// The op kinds a correction may name: every compute kind and the collectives the simulator prices by
// algorithm (point-to-point transfers are never corrected: their measured time includes waiting).
std::vector<std::string> correctable_kind_names() {
  std::vector<std::string> names;
  for (int k = 0; k <= static_cast<int>(OpKind::all_to_all); ++k) names.push_back(to_string(static_cast<OpKind>(k)));
  return names;
}

json corrections_json(const std::map<std::string, KindCorrection>& corrections) {
  json kinds = json::object();
  for (const auto& [kind, c] : corrections) {
    json runs = json::array();
    for (const CorrectionRun& run : c.runs)
      runs.push_back({{"run", run.run}, {"measured_ns", run.measured_ns}, {"model_ns", run.model_ns}, {"ops", run.ops}});
    kinds[kind] = {{"factor", c.factor}, {"runs", runs}};
  }
  return {{"version", kCorrectionsVersion}, {"kinds", kinds}};
}

std::map<std::string, KindCorrection> read_corrections(const JsonReader& r) {
  r.only_keys({"version", "kinds"});
  const JsonReader version = r.required("version");
  if (version.value() != kCorrectionsVersion)
    version.fail(fmt::format("expected corrections format version {}", kCorrectionsVersion));
  const JsonReader kinds = r.required("kinds");
  kinds.expect_object();
  const std::vector<std::string> names = correctable_kind_names();
  std::map<std::string, KindCorrection> corrections;
  const double max = std::numeric_limits<double>::max();
  for (const auto& item : kinds.value().items()) {
    const JsonReader entry = *kinds.find(item.key());
    if (std::find(names.begin(), names.end(), item.key()) == names.end())
      entry.fail_plain(fmt::format("\"{}\" is not an op kind a correction can apply to (expected one of: {})", item.key(),
                                   join_names(names)));
    entry.only_keys({"factor", "runs"});
    KindCorrection c;
    c.factor = entry.required("factor").number(1e-3, 1e3, "expected a factor in [0.001, 1000]");
    for (const JsonReader& run_reader : entry.required("runs").non_empty_elements()) {
      run_reader.only_keys({"run", "measured_ns", "model_ns", "ops"});
      CorrectionRun run;
      run.run = run_reader.required("run").string();
      run.measured_ns = run_reader.required("measured_ns").number(0, max, "expected a time in ns >= 0");
      run.model_ns = run_reader.required("model_ns").positive_number();
      run.ops = run_reader.required("ops").positive_int();
      if (!c.runs.empty() && run.run <= c.runs.back().run)
        run_reader.required("run").fail("expected runs in ascending order, each once");
      c.runs.push_back(std::move(run));
    }
    corrections.emplace(item.key(), std::move(c));
  }
  return corrections;
}

GpuKernelProfile read_gpu(const JsonReader& r) {
  r.only_keys({"gpu", "gemm", "attention_forward", "attention_backward", "memory_bound", "launch_overhead_ns",
               "grouped_gemm_issue_ns", "fused_attention_forward", "fused_attention_backward", "reference_sm_clock_MHz",
               "attention_at_reference_clock", "sustained_sm_clock_MHz", "sustained_clock", "sustained_clock_fp8", "power_model", "gemm_rows_clock", "in_situ_prior", "rank_drift",
               "measured", "corrections"});
  GpuKernelProfile g;
  g.gpu = r.required("gpu").string();
  g.gemm = read_efficiency(r.required("gemm"));
  g.attention_forward = read_efficiency(r.required("attention_forward"));
  g.attention_backward = read_efficiency(r.required("attention_backward"));
  g.fused_attention_forward = g.attention_forward;
  g.fused_attention_backward = g.attention_backward;
  if (auto f = r.find("fused_attention_forward")) g.fused_attention_forward = read_efficiency(*f);
  if (auto f = r.find("fused_attention_backward")) g.fused_attention_backward = read_efficiency(*f);
  g.memory_bound = read_efficiency(r.required("memory_bound"));
  g.launch_overhead_ns = r.required("launch_overhead_ns").number(0, 1e9, "expected a time in ns >= 0");
  if (auto issue = r.find("grouped_gemm_issue_ns")) g.grouped_gemm_issue_ns = issue->number(0, 1e9, "expected a time in ns >= 0");
  if (auto clock = r.find("reference_sm_clock_MHz"))
    g.reference_sm_clock_MHz = clock->number(1, 1e5, "expected an SM clock in MHz");
  if (auto at_reference = r.find("attention_at_reference_clock")) {
    g.attention_at_reference_clock = at_reference->boolean();
    if (g.attention_at_reference_clock && g.reference_sm_clock_MHz <= 0)
      at_reference->fail("expected false without reference_sm_clock_MHz: attention cannot be at a clock the profile does not state");
  }
  if (auto clock = r.find("sustained_sm_clock_MHz"))
    g.sustained_sm_clock_MHz = clock->number(1, 1e5, "expected an SM clock in MHz");
  if (auto curve = r.find("sustained_clock")) g.sustained_clock = read_sustained_clock(*curve);
  if (auto curve = r.find("sustained_clock_fp8")) g.sustained_clock_fp8 = read_sustained_clock(*curve);
  if (auto power = r.find("power_model")) g.power_model = read_power_model(*power);
  if (auto rows = r.find("gemm_rows_clock")) g.gemm_rows_clock = read_gemm_rows_clock(*rows);
  if (auto prior = r.find("in_situ_prior")) {
    prior->only_keys({"gemm", "attention", "memory_bound"});
    for (auto [name, field] : {std::pair{"gemm", &g.in_situ_prior.gemm}, std::pair{"attention", &g.in_situ_prior.attention},
                               std::pair{"memory_bound", &g.in_situ_prior.memory_bound}})
      if (auto value = prior->find(name)) *field = value->number(0.1, 10.0, "expected a factor in [0.1, 10]");
  }
  if (auto drift = r.find("rank_drift")) g.rank_drift = read_rank_drift(*drift);
  if (auto measured = r.find("measured")) {
    measured->expect_object();
    for (const auto& item : measured->value().items()) {
      const JsonReader entry = *measured->find(item.key());
      g.measured.emplace(item.key(), read_measurement(entry));
    }
  }
  index_measured_shapes(g);
  if (auto corrections = r.find("corrections")) g.corrections = read_corrections(*corrections);
  return g;
}

// One GPU's kernel profile as its file holds it: the optional keys only where they differ from their absence.
json gpu_json(const GpuKernelProfile& g) {
  json measured = json::object();
  for (const auto& [key, m] : g.measured) measured[key] = measurement_json(m);
  json gpu = {{"gpu", g.gpu},
              {"gemm", efficiency_json(g.gemm)},
              {"attention_forward", efficiency_json(g.attention_forward)},
              {"attention_backward", efficiency_json(g.attention_backward)},
              {"memory_bound", efficiency_json(g.memory_bound)},
              {"launch_overhead_ns", g.launch_overhead_ns},
              {"measured", measured}};
  if (g.grouped_gemm_issue_ns > 0) gpu["grouped_gemm_issue_ns"] = g.grouped_gemm_issue_ns;
  if (g.reference_sm_clock_MHz > 0) gpu["reference_sm_clock_MHz"] = g.reference_sm_clock_MHz;
  if (g.attention_at_reference_clock) gpu["attention_at_reference_clock"] = true;
  if (g.sustained_sm_clock_MHz > 0) gpu["sustained_sm_clock_MHz"] = g.sustained_sm_clock_MHz;
  if (!g.sustained_clock.points.empty()) gpu["sustained_clock"] = sustained_clock_json(g.sustained_clock);
  if (!g.sustained_clock_fp8.points.empty()) gpu["sustained_clock_fp8"] = sustained_clock_json(g.sustained_clock_fp8);
  if (g.power_model.present()) gpu["power_model"] = power_model_json(g.power_model);
  if (g.gemm_rows_clock != GemmRowsClock{}) gpu["gemm_rows_clock"] = gemm_rows_clock_json(g.gemm_rows_clock);
  if (!(g.fused_attention_forward == g.attention_forward && g.fused_attention_backward == g.attention_backward)) {
    gpu["fused_attention_forward"] = efficiency_json(g.fused_attention_forward);
    gpu["fused_attention_backward"] = efficiency_json(g.fused_attention_backward);
  }
  if (g.in_situ_prior != InSituPrior{})
    gpu["in_situ_prior"] = {{"gemm", g.in_situ_prior.gemm},
                            {"attention", g.in_situ_prior.attention},
                            {"memory_bound", g.in_situ_prior.memory_bound}};
  if (!g.corrections.empty()) gpu["corrections"] = corrections_json(g.corrections);
  if (!g.rank_drift.source.empty()) gpu["rank_drift"] = rank_drift_json(g.rank_drift);
  return gpu;
}


}  // namespace

void index_measured_shapes(GpuKernelProfile& kernels) {
  kernels.measured_gemms = index_measured_gemms(kernels.measured);
  kernels.measured_fp8_gemms = index_measured_gemms(kernels.measured, true);
  kernels.measured_kernels = index_measured_kernels(kernels.measured);
  kernels.trace_shapes = index_trace_shapes(kernels);
}

std::string profile_workload(const Profile& profile) {
  // The built-in profile describes every GPU preset: naming them all says nothing
  if (profile.builtin) return fmt::format("{} kernels, the built-in estimates", to_string(profile.framework));
  std::string gpus;
  for (const GpuKernelProfile& g : profile.gpus) gpus += (gpus.empty() ? "" : ", ") + g.gpu;
  return fmt::format("{} kernels measured on {}", to_string(profile.framework), gpus.empty() ? "no GPU" : gpus);
}

std::string gpu_family(std::string_view gpu_name) {
  const std::string name = normalised(gpu_name);
  auto has = [&](std::initializer_list<const char*> parts) {
    return std::any_of(parts.begin(), parts.end(), [&](const char* p) { return name.find(p) != std::string::npos; });
  };
  if (has({"h100", "h200", "h800", "h20"})) return "hopper";
  if (has({"b200", "gb200", "gb300", "b300"})) return "blackwell";
  if (has({"4090", "4080", "4070", "4060", "l40", "ada"})) return "ada";
  if (has({"3090", "3080", "3070", "3060"})) return "ampere-consumer";
  if (has({"a100", "a800", "a40", "a30", "a10"})) return "ampere";
  return "";
}

static std::string described_gpus(const Profile& profile) {
  std::vector<std::string> names;
  for (const GpuKernelProfile& g : profile.gpus) names.push_back(g.gpu);
  return join_names(names);
}

const GpuKernelProfile& Profile::kernels_for(const GpuSpec& gpu) const {
  const std::string wanted = normalised(gpu.name);
  for (const GpuKernelProfile& g : gpus)
    if (normalised(g.gpu) == wanted) return g;
  throw InputError(name, "/gpus", fmt::format("a kernel profile of {} (the profile describes: {})", gpu.name,
                                              described_gpus(*this)));
}

json to_json(const Profile& profile) {
  json gpus = json::array();
  for (const GpuKernelProfile& g : profile.gpus) gpus.push_back(gpu_json(g));
  json out = {{"format", "twin-profile"},
              {"version", profile.version},
              {"name", profile.name},
              {"builtin", profile.builtin},
              {"framework", std::string(to_string(profile.framework))},
              {"provenance", profile.provenance.is_null() ? json::object() : profile.provenance},
              {"gpus", gpus},
              {"intra_node", link_json(profile.intra_node)},
              {"intra_node_pcie", link_json(profile.intra_node_pcie)},
              {"inter_node", link_json(profile.inter_node)},
              {"overlap",
               {{"compute_slowdown", profile.overlap.compute_slowdown},
                {"communication_slowdown", profile.overlap.communication_slowdown}}}};
  if (!profile.overlap.points.empty()) out["overlap"]["points"] = interference_points_json(profile.overlap.points);
  if (!profile.collectives.empty()) out["collectives"] = collective_tables_to_json(profile.collectives);
  if (!profile.step_facts.is_null()) out["step_facts"] = profile.step_facts;
  if (!profile.moe_routing.empty()) {
    json routing = json::array();
    for (const MoeRouting& r : profile.moe_routing) {
      json runs = json::array();
      for (const MoeRoutingRun& run : r.runs)
        runs.push_back({{"source", run.source}, {"samples", run.samples},
                        {"tokens_per_micro_batch", run.tokens_per_micro_batch}, {"imbalance_mean", run.imbalance_mean}});
      routing.push_back({{"num_experts", r.num_experts}, {"top_k", r.top_k},
                         {"routing_imbalance", r.routing_imbalance()}, {"runs", runs}});
    }
    out["moe_routing"] = routing;
  }
  return out;
}

namespace {
// Numbers the fold measured, each >= 0, under the keys it writes (traces/kineto_fold.cpp).
json read_step_facts(const JsonReader& r) {
  r.only_keys({"source", "framework", "ranks", "steps", "step_ms", "kernel_busy_ms", "host_idle_ms", "collective_ms",
               "collective_overlapped_share"});
  json facts = json::object();
  facts["source"] = r.required("source").string();
  const std::string framework = r.required("framework").string();
  if (!framework_name(framework)) r.required("framework").fail("expected " + framework_name_list());
  facts["framework"] = framework;
  for (const char* key : {"ranks", "steps"}) facts[key] = r.required(key).integer(1, std::int64_t{1} << 30);
  for (const char* key : {"step_ms", "kernel_busy_ms", "host_idle_ms", "collective_ms", "collective_overlapped_share"})
    facts[key] = r.required(key).number(0.0, 1e12, "expected a number >= 0");
  return facts;
}

// A routing entry and the runs it was measured in; its imbalance is derived from them.
MoeRouting read_moe_routing(const JsonReader& r) {
  r.only_keys({"num_experts", "top_k", "routing_imbalance", "runs"});
  MoeRouting entry;
  entry.num_experts = static_cast<int>(r.required("num_experts").integer(1, 1 << 20));
  entry.top_k = static_cast<int>(r.required("top_k").integer(1, entry.num_experts));
  for (const JsonReader& run : r.required("runs").non_empty_elements()) {
    run.only_keys({"source", "samples", "tokens_per_micro_batch", "imbalance_mean"});
    entry.runs.push_back({run.required("source").string(), run.required("samples").integer(1, std::int64_t{1} << 40),
                          run.required("tokens_per_micro_batch").integer(1, std::int64_t{1} << 40),
                          run.required("imbalance_mean").number(1.0, 1e6, "expected a load ratio >= 1")});
  }
  // Derived from the runs: a file whose figure disagrees was edited by hand or is corrupt.
  const JsonReader value = r.required("routing_imbalance");
  if (std::abs(value.number(1.0, 1e6, "expected a load ratio >= 1") - entry.routing_imbalance()) > 1e-6)
    value.fail(fmt::format("expected {:.6f}, the runs' mean weighted by their samples", entry.routing_imbalance()));
  return entry;
}
}  // namespace

Profile profile_from_json(const json& document, const std::string& source) {
  const JsonReader root(document, source);
  root.only_keys({"format", "version", "name", "builtin", "framework", "provenance", "gpus", "intra_node",
                  "intra_node_pcie", "inter_node", "overlap", "collectives", "moe_routing", "step_facts"});
  const JsonReader format = root.required("format");
  if (format.value() != "twin-profile") format.fail("expected \"twin-profile\"");
  Profile p;
  const JsonReader version = root.required("version");
  if (version.value() != kProfileVersion) version.fail(fmt::format("expected profile format version {}", kProfileVersion));
  p.version = kProfileVersion;
  p.name = root.required("name").string();
  if (auto f = root.find("builtin")) p.builtin = f->boolean();
  if (auto f = root.find("framework")) {
    const std::optional<FrameworkName> name = framework_name(f->string());
    if (!name) f->fail("expected " + framework_name_list());
    p.framework = *name;
  }
  if (auto f = root.find("step_facts")) p.step_facts = read_step_facts(*f);
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
  overlap.only_keys({"compute_slowdown", "communication_slowdown", "points"});
  p.overlap.compute_slowdown = overlap.required("compute_slowdown").number(1.0, 100.0, "expected a slowdown >= 1");
  p.overlap.communication_slowdown =
      overlap.required("communication_slowdown").number(1.0, 100.0, "expected a slowdown >= 1");
  if (auto points = overlap.find("points")) p.overlap.points = read_interference_points(*points);
  if (auto routing = root.find("moe_routing"))
    for (const JsonReader& r : routing->elements()) p.moe_routing.push_back(read_moe_routing(r));
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

double MoeRouting::routing_imbalance() const {
  double weighted = 0, samples = 0;
  for (const MoeRoutingRun& run : runs) {
    weighted += run.imbalance_mean * static_cast<double>(run.samples);
    samples += static_cast<double>(run.samples);
  }
  return samples > 0 ? weighted / samples : 1.0;
}

const MoeRouting* Profile::routing_for(int num_experts, int top_k) const {
  for (const MoeRouting& r : moe_routing)
    if (r.num_experts == num_experts && r.top_k == top_k) return &r;
  return nullptr;
}

// Names "builtin", then a shipped measured profile ("h200-x4"), then a path.
Profile load_profile(const std::string& name_or_path) {
  if (name_or_path == "builtin") return builtin_profile();
  if (auto shipped = std::find_if(shipped_profiles().begin(), shipped_profiles().end(),
                                  [&](const ShippedProfile& p) { return p.name == name_or_path; });
      shipped != shipped_profiles().end()) {
    // Compiled in from cost/profiles/ and structure-checked by a test (ShippedProfiles.PassTheInputChecks):
    // parsed without the second, checking pass that a user's file gets.
    const std::string source = "builtin:" + name_or_path;
    return profile_from_json(nlohmann::json::parse(shipped->json), source);
  }
  std::string names = "builtin";
  for (const ShippedProfile& p : shipped_profiles()) names += fmt::format(", {}", p.name);
  const std::string text = read_input_file(name_or_path, fmt::format("a profile JSON path or one of: {}", names));
  return profile_from_json(parse_input_json(text, name_or_path), name_or_path);
}

void save_profile(const Profile& profile, const std::filesystem::path& path) {
  write_file_atomically(path, to_json(profile).dump(2) + "\n");
}

}  // namespace twin
