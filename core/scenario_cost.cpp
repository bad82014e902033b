// Prices are checked against the cluster at parse time, so that pricing a candidate never meets an unpriced GPU.
#include "core/scenario_cost.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace twin {
namespace {

// A preset's canonical spelling ("h100-sxm-80gb" -> "H100-SXM-80GB"); any other name as written.
std::string canonical_gpu_name(const std::string& name) {
  const std::optional<GpuSpec> preset = gpu_preset(name);
  return preset ? preset->name : name;
}

bool names_cluster_gpu(const Cluster& cluster, const std::string& name) {
  return std::any_of(cluster.node_groups.begin(), cluster.node_groups.end(),
                     [&](const NodeGroup& group) { return group.gpu.name == name; });
}

std::string parse_currency(const JsonReader& r) {
  const std::string code = r.value().is_string() ? r.value().get<std::string>() : std::string();
  const bool three_capitals =
      code.size() == 3 && std::all_of(code.begin(), code.end(), [](unsigned char c) { return std::isupper(c); });
  if (!three_capitals) r.fail("expected a currency code of three capital letters (ISO 4217, e.g. \"USD\")");
  return code;
}

double parse_price(const JsonReader& r) {
  return r.number(0, kMaxPricePerGpuHour, fmt::format("expected a price per GPU-hour from 0 to {:g}", kMaxPricePerGpuHour));
}

std::vector<std::pair<std::string, double>> parse_prices_by_gpu(const JsonReader& r, const Cluster& cluster) {
  r.expect_object();
  std::vector<std::pair<std::string, double>> prices;
  for (const auto& [key, value] : r.value().items()) {  // sorted by key
    const JsonReader price = r.required(key);  // its JSON path escaped as a pointer
    const std::string name = canonical_gpu_name(key);
    if (!gpu_preset(key) && !names_cluster_gpu(cluster, name))
      price.fail_plain(fmt::format("expected a key naming a GPU preset or a GPU of the cluster, got \"{}\"", key));
    const bool repeated = std::any_of(prices.begin(), prices.end(), [&](const auto& p) { return p.first == name; });
    if (repeated) price.fail_plain(fmt::format("expected each GPU priced once, got \"{}\" again", key));
    prices.emplace_back(name, parse_price(price));
  }
  return prices;
}

const double* price_of(const CostConfig& cost, const std::string& gpu_name) {
  for (const auto& [name, price] : cost.price_per_gpu_hour_by_gpu)
    if (name == gpu_name) return &price;
  return cost.price_per_gpu_hour ? &*cost.price_per_gpu_hour : nullptr;
}

}  // namespace

std::optional<CostConfig> parse_cost_section(const JsonReader& root, const Cluster& cluster) {
  const std::optional<JsonReader> r = root.find("cost");
  if (!r) return std::nullopt;
  r->expect_object();
  r->only_keys({"currency", "price_per_gpu_hour", "price_per_gpu_hour_by_gpu", "tokens_to_train"});
  CostConfig cost;
  if (auto f = r->find("currency")) cost.currency = parse_currency(*f);
  if (auto f = r->find("price_per_gpu_hour")) cost.price_per_gpu_hour = parse_price(*f);
  if (auto f = r->find("price_per_gpu_hour_by_gpu")) cost.price_per_gpu_hour_by_gpu = parse_prices_by_gpu(*f, cluster);
  if (auto f = r->find("tokens_to_train"))
    cost.tokens_to_train = f->number(1, kMaxTokensToTrain, fmt::format("expected a token count from 1 to {:g}", kMaxTokensToTrain));
  for (const NodeGroup& group : cluster.node_groups)
    if (!price_of(cost, group.gpu.name))
      r->fail_plain(fmt::format("expected price_per_gpu_hour, or a price for \"{}\" in price_per_gpu_hour_by_gpu",
                                group.gpu.name));
  return cost;
}

double cluster_price_per_hour(const CostConfig& cost, const Cluster& cluster) {
  double total = 0;
  for (const NodeGroup& group : cluster.node_groups) {
    const double* price = price_of(cost, group.gpu.name);
    total += (price ? *price : 0) * group.count * group.gpus_per_node;
  }
  return total;
}

}  // namespace twin
