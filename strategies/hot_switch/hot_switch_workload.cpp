// Scaling a length distribution to the batch, HotSPa's greedy packing, and the per-phase scenario.
#include "strategies/hot_switch/hot_switch_workload.hpp"

#include <algorithm>
#include <cmath>

namespace twin {
namespace {

// Largest-remainder rounding of weight(0), ..., weight(n - 1) to integers summing to `total` (ties to the lower
// index). The seats left after rounding down go to the largest remainders, chosen in a heap of that many seats:
// a histogram of millions of bars costs no sorted copy of itself.
template <class Weight>
std::vector<std::int64_t> apportion(std::size_t n, const Weight& weight, std::int64_t total) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += weight(i);
  const auto exact = [&](std::size_t i) { return sum > 0 ? weight(i) / sum * static_cast<double>(total) : 0; };
  std::vector<std::int64_t> counts(n, 0);
  std::int64_t given = 0;
  for (std::size_t i = 0; i < n; ++i) {
    counts[i] = static_cast<std::int64_t>(std::floor(exact(i)));
    given += counts[i];
  }
  using Seat = std::pair<double, std::size_t>;  // remainder, index
  const auto before = [](const Seat& a, const Seat& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  const std::size_t seats = static_cast<std::size_t>(std::clamp<std::int64_t>(total - given, 0, static_cast<std::int64_t>(n)));
  std::vector<Seat> kept;  // a heap whose front is the seat that ranks last
  kept.reserve(seats);
  for (std::size_t i = 0; i < n && seats > 0; ++i) {
    const Seat seat{exact(i) - std::floor(exact(i)), i};
    if (kept.size() < seats) {
      kept.push_back(seat);
      std::push_heap(kept.begin(), kept.end(), before);
    } else if (before(seat, kept.front())) {
      std::pop_heap(kept.begin(), kept.end(), before);
      kept.back() = seat;
      std::push_heap(kept.begin(), kept.end(), before);
    }
  }
  for (const Seat& seat : kept) ++counts[seat.second];
  return counts;
}

}  // namespace

std::vector<SeqLengthCount> batch_sequences(const Scenario& scenario) {
  const TrainingConfig& t = scenario.training;
  const auto batch_of = [&](std::size_t n, const auto& weight, const auto& length) {
    const std::vector<std::int64_t> counts = apportion(n, weight, t.global_batch_size);
    std::vector<SeqLengthCount> batch;
    for (std::size_t i = 0; i < n; ++i)
      if (counts[i] > 0) batch.push_back({length(i), counts[i]});
    return batch;
  };
  if (!t.seq_length_histogram.empty()) {
    const std::vector<SeqLengthCount>& bars = t.seq_length_histogram.bars();
    return batch_of(
        bars.size(), [&](std::size_t i) { return static_cast<double>(bars[i].count); },
        [&](std::size_t i) { return bars[i].length; });
  }
  if (!t.seq_length_buckets.empty()) {
    const std::vector<SeqLengthBucket>& buckets = t.seq_length_buckets;
    return batch_of(
        buckets.size(), [&](std::size_t i) { return buckets[i].fraction; }, [&](std::size_t i) { return buckets[i].max; });
  }
  return {{t.seq_length, t.global_batch_size}};
}

std::vector<std::vector<std::int64_t>> greedy_packs(std::vector<std::int64_t> lengths, std::int64_t capacity) {
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  std::vector<std::vector<std::int64_t>> packs;
  std::size_t first = 0, last = lengths.size();  // unvisited: [first, last)
  while (first < last) {
    std::vector<std::int64_t> pack{lengths[first++]};
    std::int64_t used = pack.front();
    while (first < last && used + lengths[last - 1] <= capacity) {
      used += lengths[--last];
      pack.push_back(lengths[last]);
    }
    packs.push_back(std::move(pack));
  }
  return packs;
}

std::int64_t greedy_pack_count(std::vector<std::int64_t> lengths, std::int64_t capacity) {
  return static_cast<std::int64_t>(greedy_packs(std::move(lengths), capacity).size());
}

std::vector<std::vector<std::int64_t>> phase_packs(const std::vector<SeqLengthCount>& batch,
                                                   const PhaseWorkload& workload, std::int64_t packs) {
  std::vector<std::int64_t> lengths;
  for (const SeqLengthCount& bar : batch)
    if (bar.length > workload.min_exclusive && bar.length <= workload.max_length)
      lengths.insert(lengths.end(), static_cast<std::size_t>(bar.count), bar.length);
  std::vector<std::vector<std::int64_t>> out = greedy_packs(std::move(lengths), workload.max_length);
  while (static_cast<std::int64_t>(out.size()) < packs) out.push_back({workload.max_length});
  return out;
}

PhaseWorkload pack_range(const std::vector<SeqLengthCount>& batch, std::int64_t min_exclusive, std::int64_t max_length) {
  PhaseWorkload w;
  w.min_exclusive = min_exclusive;
  w.max_length = max_length;
  std::vector<std::int64_t> lengths;
  for (const SeqLengthCount& bar : batch) {
    if (bar.length <= min_exclusive || bar.length > max_length) continue;
    w.sequences += bar.count;
    w.tokens += bar.count * bar.length;
    w.squared_lengths += static_cast<double>(bar.count) * static_cast<double>(bar.length) * static_cast<double>(bar.length);
    lengths.insert(lengths.end(), static_cast<std::size_t>(bar.count), bar.length);
  }
  w.packs = greedy_pack_count(std::move(lengths), max_length);
  return w;
}

std::vector<std::int64_t> candidate_boundaries(const Scenario& scenario, const std::vector<SeqLengthCount>& batch) {
  const std::int64_t longest = batch.back().length;
  std::vector<std::int64_t> ends;
  if (!scenario.training.seq_length_buckets.empty()) {
    for (const SeqLengthBucket& bucket : scenario.training.seq_length_buckets) ends.push_back(bucket.max);
  } else {
    std::int64_t edge = 1;
    while (edge < batch.front().length) edge *= 2;
    for (; edge < longest; edge *= 2) ends.push_back(edge);
  }
  ends.push_back(longest);
  std::vector<std::int64_t> kept;
  for (std::int64_t end : ends) {
    if (end > longest || (!kept.empty() && end <= kept.back())) continue;
    const std::int64_t previous = kept.empty() ? 0 : kept.back();
    if (!pack_range(batch, previous, end).empty()) kept.push_back(end);
  }
  if (kept.empty() || kept.back() != longest) kept.push_back(longest);
  return kept;
}

std::int64_t padded_packs(const PhaseWorkload& workload, const Strategy& strategy) {
  const std::int64_t step = static_cast<std::int64_t>(strategy.data_parallel_size) * strategy.micro_batch_size;
  return (workload.packs + step - 1) / step * step;
}

Scenario phase_scenario(const Scenario& scenario, const PhaseWorkload& workload, std::int64_t packs) {
  Scenario phase = scenario;
  phase.training.seq_length = workload.max_length;
  phase.training.global_batch_size = packs;
  phase.training.seq_length_buckets.clear();
  phase.training.seq_length_histogram = {};
  phase.search.hot_switch = false;
  phase.strategy.reset();
  phase.hot_switch_plan.reset();
  phase.per_layer_plan.reset();
  // Weights reach a phase through the switch; only the home phase steps the optimizer, and it gathers the
  // updated weights after its step (an overlapped gather at a phase's start would move weights twice).
  phase.framework.overlap_param_gather = false;
  return phase;
}

double attention_scale(const PhaseWorkload& workload, std::int64_t packs) {
  const double full = static_cast<double>(packs) * static_cast<double>(workload.max_length) *
                      static_cast<double>(workload.max_length);
  return full > 0 ? workload.squared_lengths / full : 0;
}

void scale_attention(IterationGraph& graph, double scale) {
  for (RankClass& rank_class : graph.classes) {
    for (OpIndex i = 0; i < rank_class.size(); ++i) {
      Op& op = rank_class.graph[i];
      if (op.kind != OpKind::attention_forward && op.kind != OpKind::attention_backward) continue;
      op.attention.seq_kv =
          std::max<std::int64_t>(1, std::llround(static_cast<double>(op.attention.seq_kv) * scale));
      op.attention.packed = scale < 1;
      op.flops *= scale;
    }
  }
}

Throughput phases_throughput(const Scenario& scenario, const std::vector<SeqLengthCount>& batch,
                             const std::vector<PhaseWorkload>& phases, const std::vector<Strategy>& strategies,
                             double iteration_s) {
  Throughput t;
  t.iteration_s = iteration_s;
  if (iteration_s <= 0) return t;
  double tokens = 0, model_flops = 0, hardware_flops = 0;
  for (std::size_t p = 0; p < phases.size(); ++p) {
    for (const SeqLengthCount& bar : batch) {
      if (bar.length <= phases[p].min_exclusive || bar.length > phases[p].max_length) continue;
      Scenario one = scenario;
      one.training.seq_length = bar.length;
      one.training.global_batch_size = 1;
      tokens += static_cast<double>(bar.count * bar.length);
      model_flops += static_cast<double>(bar.count) * model_flops_per_iteration(one);
      hardware_flops += static_cast<double>(bar.count) * hardware_flops_per_iteration(one, strategies[p].recompute);
    }
  }
  const double peak_flops = peak_flops_of_first_gpus(scenario, scenario.cluster.total_gpus());
  t.tokens_per_s = tokens / iteration_s;
  if (peak_flops > 0) {
    t.mfu = model_flops / (iteration_s * peak_flops);
    t.hfu = hardware_flops / (iteration_s * peak_flops);
  }
  return t;
}

}  // namespace twin
