// How an MoE router spreads its token copies over the experts (the scenario's model.moe.routing), and what follows
// for one layer under expert parallelism: the load of the busiest EP rank and of its busiest expert, which every
// rank waits for at the combine all-to-all. The lowering prices an MoE layer's grouped GEMMs and all-to-alls by it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json_reader.hpp"

namespace twin {

struct MoeConfig;
struct ModelConfig;

enum class RoutingDistribution : std::uint8_t {
  balanced,    // every expert exactly the mean, every micro-batch: the ideal no router reaches
  forced,      // uniform shares, drawn per micro-batch: Megatron's --moe-router-force-load-balancing (random logits),
               // how NVIDIA's published MoE tables are timed
  zipf,        // the i-th most popular expert's share proportional to i^-exponent, drawn per micro-batch
  aux_loss,    // trained with an auxiliary load-balancing loss: Zipf-shaped with the published busiest-expert share
  loss_free,   // trained with auxiliary-loss-free bias balancing (DeepSeek-V3): the same, its published share
  measured,    // a run's per-layer histograms of tokens per expert (their mean shares), drawn per micro-batch
  hot_expert,  // model.moe.routing_imbalance x: one expert at x times the mean, the others equal, every micro-batch
};

// One layer's measured routing: the tokens each expert received, summed over the samples read.
struct ExpertHistogram {
  int layer = 0;
  std::vector<std::int64_t> tokens_per_expert;
  bool operator==(const ExpertHistogram&) const = default;
};

struct RoutingModel {
  RoutingDistribution distribution = RoutingDistribution::balanced;
  double exponent = 0;    // zipf
  double imbalance = 1;   // hot_expert: the busiest expert over the mean
  std::vector<ExpertHistogram> histograms;  // measured: by layer, each layer once
  bool operator==(const RoutingModel&) const = default;
};

// Published busiest-expert loads of trained routers, as MaxVio_global = max load / mean load - 1 over a validation
// set: Wang et al. 2024, "Auxiliary-Loss-Free Load Balancing Strategy for Mixture-of-Experts" (arXiv:2408.15664),
// Table 2, their 3B model (64 routed experts, top-6): auxiliary loss 0.52, loss-free 0.04.
inline constexpr double kAuxLossMaxViolation = 0.52;
inline constexpr double kLossFreeMaxViolation = 0.04;

// The busiest EP rank of one MoE layer, expected over micro-batches.
struct ExpertParallelLoad {
  double rank_load = 1;    // its routed copies over the mean rank's
  double expert_load = 1;  // its busiest expert's copies over the mean expert's
  bool operator==(const ExpertParallelLoad&) const = default;
};

// The routing the simulator prices for `moe`: model.moe.routing where given, else routing_imbalance as a hot expert
// (the profile's measured one where the scenario set neither: pipeline/simulate_run.cpp), else balanced.
RoutingModel effective_routing(const MoeConfig& moe);

// Layer `layer`'s busiest rank when `expert_parallel` ranks hold num_experts / expert_parallel experts each
// (Megatron's contiguous placement: rank r the r-th block) and `copies` routed copies (tokens x top-k over the EP
// group) are drawn per micro-batch. Shares without an expert identity (forced, zipf, aux_loss, loss_free) fall on
// the ranks at random; measured ones where the run's experts were. The expectation over micro-batches and placements
// is a fixed-seed Monte Carlo (the same inputs, the same loads), each expert's count normal around its share.
ExpertParallelLoad expert_parallel_load(const MoeConfig& moe, int layer, int expert_parallel, double copies);

// Megatron's expert capacity in copies (get_capacity and apply_router_token_dropping, megatron/core/transformer/moe/
// moe_utils.py at NVIDIA/Megatron-LM d98e8a64dd): of a rank's `tokens`, routed top_k each over num_experts, each expert
// keeps at most ceil(tokens x top_k / num_experts x expert_capacity_factor) copies. A capacity above the tokens drops
// nothing (no expert receives a token twice) and, padded, every expert computes all the tokens: it is at most
// `tokens`. Dropless (no factor): none. The simulator's loads and twin execute's drops both take it from here.
std::optional<std::int64_t> expert_capacity(const MoeConfig& moe, std::int64_t tokens);

// expert_parallel_load of every layer of `model` (index: the layer; a dense layer's is balanced).
std::vector<ExpertParallelLoad> layer_loads(const ModelConfig& model, int expert_parallel, double copies);

// The persistent share of each expert (summing to 1; by popularity where the distribution gives no identity).
std::vector<double> expert_shares(const RoutingModel& routing, int num_experts, int layer);
// The Zipf exponent whose busiest expert of `num_experts` carries `busiest_over_mean` times the mean share.
double zipf_exponent_for(int num_experts, double busiest_over_mean);

// model.moe.routing: {"distribution": ..., "exponent": s (zipf), "histogram": FILE or [...] (measured)}. A histogram
// is a file name relative to `scenario_folder` of a JSON object whose "expert_loads" array is read (a run's
// measured/rank<r>.json is one; its other keys are not read), or that array inline: entries {"layer",
// "tokens_per_expert": [num_experts counts]} with optional "iteration" and "micro_batch".
RoutingModel parse_routing(const JsonReader& r, int num_experts, const std::filesystem::path& scenario_folder);
// The scenario's routing object again (a measured histogram inline), which parse_routing reads back as it was.
nlohmann::json routing_json(const RoutingModel& routing);
std::string to_string(RoutingDistribution d);

}  // namespace twin
