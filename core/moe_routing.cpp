// Routing models: their persistent expert shares, the busiest EP rank's load drawn from them, and their JSON form.
#include "core/moe_routing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "core/input_file.hpp"
#include "core/splitmix.hpp"
#include "core/model.hpp"
#include "core/model_limits.hpp"

namespace twin {

namespace {

// Micro-batches (with a placement each) the expectation averages over: the busiest rank's excess over the mean is
// then known to about 1/16 of itself (its spread over the draws is about half of it, over the square root of 256).
constexpr int kTrials = 256;

// A portable generator (the standard's distributions differ between libraries; same seed, same numbers here).
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    const std::uint64_t out = splitmix64(state_);
    state_ += kSplitMixIncrement;
    return out;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller
    const double u = std::max(uniform(), 0x1.0p-53), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }

 private:
  std::uint64_t state_;
};

std::vector<double> zipf_shares(int experts, double exponent) {
  std::vector<double> shares(static_cast<std::size_t>(experts));
  for (int i = 0; i < experts; ++i) shares[i] = std::pow(static_cast<double>(i + 1), -exponent);
  const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
  for (double& share : shares) share /= sum;
  return shares;
}

// Measured shares of `layer`, or of every measured layer pooled where the run did not measure that one (a run at
// reduced depth).
std::vector<double> measured_shares(const std::vector<ExpertHistogram>& histograms, int experts, int layer) {
  std::vector<double> tokens(static_cast<std::size_t>(experts), 0.0);
  const auto own = std::find_if(histograms.begin(), histograms.end(), [&](const auto& h) { return h.layer == layer; });
  for (const ExpertHistogram& h : histograms)
    if (own == histograms.end() || &h == &*own)
      for (int e = 0; e < experts; ++e) tokens[e] += static_cast<double>(h.tokens_per_expert[e]);
  const double sum = std::accumulate(tokens.begin(), tokens.end(), 0.0);
  for (double& t : tokens) t /= sum;
  return tokens;
}

// The expected busiest rank over micro-batches: each expert's count normal around copies x share (the binomial's
// variance), renormalised to the copies drawn, and at most `capacity` times the mean expert's (tokens beyond it
// dropped); experts placed at random unless `placed`.
ExpertParallelLoad monte_carlo_load(const std::vector<double>& shares, int ep, double copies, bool placed,
                                    double capacity) {
  const int experts = static_cast<int>(shares.size()), per_rank = experts / ep;
  SplitMix64 random(0x7477696E);  // "twin"
  std::vector<int> place(static_cast<std::size_t>(experts));
  std::vector<double> count(static_cast<std::size_t>(experts));
  double rank_sum = 0, expert_sum = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::iota(place.begin(), place.end(), 0);
    if (!placed)
      for (int i = experts - 1; i > 0; --i) std::swap(place[i], place[random.next() % static_cast<std::uint64_t>(i + 1)]);
    double drawn = 0;
    for (int e = 0; e < experts; ++e) {
      const double mean = copies * shares[e];
      count[e] = std::max(0.0, mean + std::sqrt(mean * (1.0 - shares[e])) * random.normal());
      drawn += count[e];
    }
    const double scale = drawn > 0 ? copies / drawn : 1.0;
    const double kept = capacity * copies / experts / scale;  // the capacity among the counts before scaling
    double busiest_rank = 0, its_busiest_expert = 0;
    for (int r = 0; r < ep; ++r) {
      double load = 0, top = 0;
      for (int i = r * per_rank; i < (r + 1) * per_rank; ++i) {
        const double taken = std::min(count[place[i]], kept);
        load += taken;
        top = std::max(top, taken);
      }
      if (load > busiest_rank) busiest_rank = load, its_busiest_expert = top;
    }
    rank_sum += busiest_rank * scale / (copies / ep);
    expert_sum += its_busiest_expert * scale / (copies / experts);
  }
  // One rank holding every expert receives every copy, exactly (the sum above may round a last bit away).
  return {ep == 1 && !std::isfinite(capacity) ? 1.0 : rank_sum / kTrials, expert_sum / kTrials};
}

}  // namespace

double zipf_exponent_for(int num_experts, double busiest_over_mean) {
  double low = 0, high = 16;  // the busiest share rises with the exponent, from 1/E at 0 towards 1
  for (int step = 0; step < 60; ++step) {
    const double mid = (low + high) / 2;
    (zipf_shares(num_experts, mid)[0] * num_experts < busiest_over_mean ? low : high) = mid;
  }
  return (low + high) / 2;
}

std::vector<double> expert_shares(const RoutingModel& routing, int num_experts, int layer) {
  const double uniform = 1.0 / num_experts;
  switch (routing.distribution) {
    case RoutingDistribution::balanced:
    case RoutingDistribution::forced: return std::vector<double>(static_cast<std::size_t>(num_experts), uniform);
    case RoutingDistribution::zipf: return zipf_shares(num_experts, routing.exponent);
    case RoutingDistribution::aux_loss:
      return zipf_shares(num_experts, zipf_exponent_for(num_experts, 1 + kAuxLossMaxViolation));
    case RoutingDistribution::loss_free:
      return zipf_shares(num_experts, zipf_exponent_for(num_experts, 1 + kLossFreeMaxViolation));
    case RoutingDistribution::measured: return measured_shares(routing.histograms, num_experts, layer);
    case RoutingDistribution::hot_expert: {
      std::vector<double> shares(static_cast<std::size_t>(num_experts),
                                 num_experts > 1 ? (1 - routing.imbalance * uniform) / (num_experts - 1) : 1.0);
      shares[0] = routing.imbalance * uniform;
      return shares;
    }
  }
  return {};
}

RoutingModel effective_routing(const MoeConfig& moe) {
  if (moe.routing) return *moe.routing;
  RoutingModel routing;
  if (moe.routing_imbalance) routing = {RoutingDistribution::hot_expert, 0, *moe.routing_imbalance, {}};
  return routing;
}

namespace {

// One hot expert at `busiest` times the mean, the others equal, each kept to `capacity` times the mean: the busiest
// rank (the hot expert's) over the mean rank.
double hot_rank_load(const MoeConfig& moe, int expert_parallel, double busiest, double capacity) {
  const double experts = moe.num_experts, per_rank = experts / expert_parallel;
  if (moe.num_experts <= 1) return std::min(busiest, capacity);
  const double others = std::min((experts - busiest) / (experts - 1), capacity);  // in units of the mean expert
  return (std::min(busiest, capacity) + (per_rank - 1) * others) / per_rank;
}

// The mean expert's copies of a rank's `tokens`, routed top_k each over num_experts.
double mean_expert_copies(const MoeConfig& moe, std::int64_t tokens) {
  return static_cast<double>(tokens) * moe.top_k / moe.num_experts;
}

// The capacity (expert_capacity) in units of the mean expert's copies on a rank: each rank drops its own tokens'
// copies, its tokens being `copies` over top_k and the EP group. Dropless: infinite.
double capacity_in_means(const MoeConfig& moe, int expert_parallel, double copies) {
  if (!moe.expert_capacity_factor) return std::numeric_limits<double>::infinity();
  const std::int64_t tokens = std::llround(copies / moe.top_k / expert_parallel);
  if (tokens <= 0) return *moe.expert_capacity_factor;
  return static_cast<double>(*expert_capacity(moe, tokens)) / mean_expert_copies(moe, tokens);
}

ExpertParallelLoad load_of(const RoutingModel& routing, const MoeConfig& moe, int layer, int expert_parallel,
                           double copies) {
  // An expert takes at most its capacity, the rest dropped (apply_router_token_dropping); padded, exactly that.
  const double capacity = capacity_in_means(moe, expert_parallel, copies);
  if (moe.pad_expert_input_to_capacity) return {capacity, capacity};
  switch (routing.distribution) {
    case RoutingDistribution::balanced: return {std::min(1.0, capacity), std::min(1.0, capacity)};
    case RoutingDistribution::hot_expert:
      return {hot_rank_load(moe, expert_parallel, moe.imbalance(), capacity), std::min(moe.imbalance(), capacity)};
    case RoutingDistribution::forced:
    case RoutingDistribution::zipf:
    case RoutingDistribution::aux_loss:
    case RoutingDistribution::loss_free:
    case RoutingDistribution::measured: break;
  }
  if (copies <= 0) return {};
  return monte_carlo_load(expert_shares(routing, moe.num_experts, layer), expert_parallel, copies,
                          routing.distribution == RoutingDistribution::measured, capacity);
}

// The last few models' loads, per thread: the memory model asks for them once per layer of every candidate.
struct LoadsAsked {
  MoeConfig moe;
  int num_layers = 0, expert_parallel = 0;
  double copies = 0;
  std::vector<ExpertParallelLoad> loads;
};
constexpr std::size_t kLoadsRemembered = 8;
thread_local std::vector<LoadsAsked> loads_asked;

}  // namespace

std::optional<std::int64_t> expert_capacity(const MoeConfig& moe, std::int64_t tokens) {
  if (!moe.expert_capacity_factor) return std::nullopt;
  const auto capacity =
      static_cast<std::int64_t>(std::ceil(mean_expert_copies(moe, tokens) * *moe.expert_capacity_factor));
  return std::min(capacity, tokens);
}

ExpertParallelLoad expert_parallel_load(const MoeConfig& moe, int layer, int expert_parallel, double copies) {
  return load_of(effective_routing(moe), moe, layer, expert_parallel, copies);
}

std::vector<ExpertParallelLoad> layer_loads(const ModelConfig& model, int expert_parallel, double copies) {
  for (const LoadsAsked& asked : loads_asked)
    if (asked.num_layers == model.num_layers && asked.expert_parallel == expert_parallel && asked.copies == copies &&
        asked.moe == model.moe)
      return asked.loads;
  std::vector<ExpertParallelLoad> loads(static_cast<std::size_t>(model.num_layers));
  const RoutingModel routing = effective_routing(model.moe);
  // Only measured routings differ by layer: the others are drawn once.
  const bool per_layer = routing.distribution == RoutingDistribution::measured;
  std::optional<ExpertParallelLoad> same;
  for (int layer = 0; layer < model.num_layers; ++layer) {
    if (!model.is_moe_layer(layer)) continue;
    if (!per_layer && same) {
      loads[layer] = *same;
      continue;
    }
    loads[layer] = load_of(routing, model.moe, layer, expert_parallel, copies);
    same = loads[layer];
  }
  if (loads_asked.size() == kLoadsRemembered) loads_asked.erase(loads_asked.begin());
  loads_asked.push_back({model.moe, model.num_layers, expert_parallel, copies, loads});
  return loads;
}

std::string to_string(RoutingDistribution d) {
  switch (d) {
    case RoutingDistribution::balanced: return "balanced";
    case RoutingDistribution::forced: return "forced";
    case RoutingDistribution::zipf: return "zipf";
    case RoutingDistribution::aux_loss: return "aux_loss";
    case RoutingDistribution::loss_free: return "loss_free";
    case RoutingDistribution::measured: return "measured";
    case RoutingDistribution::hot_expert: return "hot_expert";
  }
  return "balanced";
}

}  // namespace twin
