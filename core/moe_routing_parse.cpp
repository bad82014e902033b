// model.moe.routing read from a scenario (a measured histogram inline or from a run's file) and written back.
#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/model_limits.hpp"
#include "core/moe_routing.hpp"

namespace twin {

namespace {

constexpr std::int64_t kMaxTokenCount = std::int64_t{1} << 53;

// Adds one (micro-batch, layer) sample's tokens per expert to its layer's histogram.
void add_layer_sample(std::vector<ExpertHistogram>& histograms, const JsonReader& layer_value,
                      const JsonReader& counts, int num_experts) {
  const int layer = static_cast<int>(layer_value.integer(0, kMaxLayers - 1));
  const std::vector<JsonReader> experts = counts.elements();
  if (static_cast<int>(experts.size()) != num_experts)
    counts.fail_plain(fmt::format("expected {} counts (model.moe.num_experts), got {}", num_experts, experts.size()));
  auto h = std::find_if(histograms.begin(), histograms.end(), [&](const auto& x) { return x.layer == layer; });
  if (h == histograms.end())
    h = histograms.insert(histograms.end(), {layer, std::vector<std::int64_t>(static_cast<std::size_t>(num_experts))});
  for (int e = 0; e < num_experts; ++e) {
    h->tokens_per_expert[e] += experts[e].integer(0, kMaxTokenCount);
    if (h->tokens_per_expert[e] > kMaxTokenCount)
      experts[e].fail_plain(fmt::format("expected a layer's tokens summed to at most {}", kMaxTokenCount));
  }
}

// Expert loads, summed per layer: an array of {"layer", "tokens_per_expert"} entries (a scenario's inline
// histogram), or the same as columns, {"layer": [...], "tokens_per_expert": [[...], ...]}, as `twin execute` writes
// a rank's measured/rank<r>.json (executor/run_report.cpp); "iteration" and "micro_batch" may stand beside them.
std::vector<ExpertHistogram> parse_expert_loads(const JsonReader& loads, int num_experts) {
  std::vector<ExpertHistogram> histograms;
  if (loads.value().is_object()) {
    loads.only_keys({"iteration", "micro_batch", "layer", "tokens_per_expert"});
    const std::vector<JsonReader> layers = loads.required("layer").non_empty_elements();
    const JsonReader counts = loads.required("tokens_per_expert");
    const std::vector<JsonReader> samples = counts.elements();
    if (samples.size() != layers.size())
      counts.fail_plain(fmt::format("expected one entry per layer entry ({}), got {}", layers.size(), samples.size()));
    for (const char* key : {"iteration", "micro_batch"})
      if (auto f = loads.find(key))
        for (const JsonReader& v : f->elements()) v.integer(0, INT32_MAX);
    for (std::size_t i = 0; i < layers.size(); ++i) add_layer_sample(histograms, layers[i], samples[i], num_experts);
  } else {
    for (const JsonReader& entry : loads.non_empty_elements()) {
      entry.only_keys({"iteration", "micro_batch", "layer", "tokens_per_expert"});
      if (auto f = entry.find("iteration")) f->integer(0, INT32_MAX);
      if (auto f = entry.find("micro_batch")) f->integer(0, INT32_MAX);
      add_layer_sample(histograms, entry.required("layer"), entry.required("tokens_per_expert"), num_experts);
    }
  }
  for (const ExpertHistogram& h : histograms)
    if (std::all_of(h.tokens_per_expert.begin(), h.tokens_per_expert.end(), [](std::int64_t t) { return t == 0; }))
      loads.fail_plain(fmt::format("expected some tokens routed in layer {}, got none", h.layer));
  std::sort(histograms.begin(), histograms.end(), [](const auto& a, const auto& b) { return a.layer < b.layer; });
  return histograms;
}

std::vector<ExpertHistogram> parse_histogram(const JsonReader& r, int num_experts,
                                             const std::filesystem::path& scenario_folder) {
  if (r.value().is_array() || r.value().is_object()) return parse_expert_loads(r, num_experts);
  if (!r.value().is_string()) r.fail("expected a file name, or expert loads (an array of entries or their columns)");
  const std::filesystem::path path = scenario_folder / r.string();
  std::string text;
  try {
    text = read_input_file(path, "expert loads: a JSON object with \"expert_loads\" (a run's measured/rank<r>.json)");
  } catch (const std::exception& error) {
    r.fail_plain(fmt::format("expected a readable histogram of expert loads: {}", error.what()));
  }
  const std::string file_name = path.string();  // the reader keeps a reference to it
  const nlohmann::json document = parse_input_json(text, file_name);
  const JsonReader file(document, file_name);
  file.expect_object();
  return parse_expert_loads(file.required("expert_loads"), num_experts);
}

}  // namespace

RoutingModel parse_routing(const JsonReader& r, int num_experts, const std::filesystem::path& scenario_folder) {
  r.only_keys({"distribution", "exponent", "histogram"});
  RoutingModel routing;
  const std::string name = r.required("distribution").one_of(
      {"balanced", "forced", "zipf", "aux_loss", "loss_free", "measured"}, "routing distribution");
  for (RoutingDistribution d : {RoutingDistribution::balanced, RoutingDistribution::forced, RoutingDistribution::zipf,
                                RoutingDistribution::aux_loss, RoutingDistribution::loss_free,
                                RoutingDistribution::measured})
    if (to_string(d) == name) routing.distribution = d;
  const auto exponent = r.find("exponent");
  const auto histogram = r.find("histogram");
  if (exponent && routing.distribution != RoutingDistribution::zipf)
    exponent->fail_plain("expected exponent only with distribution zipf");
  if (histogram && routing.distribution != RoutingDistribution::measured)
    histogram->fail_plain("expected histogram only with distribution measured");
  if (routing.distribution == RoutingDistribution::zipf)
    routing.exponent = r.required("exponent").number(0, 16, "expected a Zipf exponent in [0, 16]");
  if (routing.distribution == RoutingDistribution::measured)
    routing.histograms = parse_histogram(r.required("histogram"), num_experts, scenario_folder);
  return routing;
}

nlohmann::json routing_json(const RoutingModel& routing) {
  nlohmann::json out = {{"distribution", to_string(routing.distribution)}};
  if (routing.distribution == RoutingDistribution::zipf) out["exponent"] = routing.exponent;
  if (routing.distribution == RoutingDistribution::measured) {
    nlohmann::json loads = nlohmann::json::array();
    for (const ExpertHistogram& h : routing.histograms)
      loads.push_back({{"layer", h.layer}, {"tokens_per_expert", h.tokens_per_expert}});
    out["histogram"] = loads;
  }
  return out;
}

}  // namespace twin
