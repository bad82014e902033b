// The scenario's optional "cost" section: what a GPU-hour costs (one price, or one per GPU kind of a mixed cluster)
// and how many tokens the training run is for. It prices what the simulation found and is no input to it: the
// Scenario the search reads (and best.json holds) does not carry it.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cluster.hpp"
#include "core/json_reader.hpp"

namespace twin {

inline constexpr double kMaxPricePerGpuHour = 1e6;
inline constexpr double kMaxTokensToTrain = 1e18;

struct CostConfig {
  std::string currency = "USD";  // three capital letters (ISO 4217); it names the cost columns
  std::optional<double> price_per_gpu_hour;  // the GPUs the by-kind prices do not name
  // GPU name (a preset, spelled as its canonical name, or a GPU of the cluster) -> price per GPU-hour, by name.
  std::vector<std::pair<std::string, double>> price_per_gpu_hour_by_gpu;
  std::optional<double> tokens_to_train;
};

// `root` is the scenario document; nullopt without a "cost" section. Every GPU of `cluster` must have a price; a
// by-kind key names a GPU preset or a GPU of the cluster (a sweep over GPU kinds prices kinds the base cluster
// lacks). Throws InputError at the offending JSON path.
std::optional<CostConfig> parse_cost_section(const JsonReader& root, const Cluster& cluster);

// What one hour of every GPU of `cluster` costs. `cost` must have been parsed against a cluster of the same GPUs.
double cluster_price_per_hour(const CostConfig& cost, const Cluster& cluster);

}  // namespace twin
