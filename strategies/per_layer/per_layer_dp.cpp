// Knapsack over layers: memory quantised so the table stays small, rounded up per option so that a
// solution the table accepts never exceeds the budget. Back-pointers per (layer, memory, option).
#include "strategies/per_layer/per_layer_dp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace twin {

DpSolution choose_layer_options(const DpProblem& p) {
  DpSolution solution;
  const int n = static_cast<int>(p.options.size());
  const int layouts = static_cast<int>(p.relayout_time.size());
  const int buckets = std::max(1, p.memory_buckets);
  if (p.layers <= 0 || n == 0 || p.budget_bytes <= 0) return solution;
  const double quantum = p.budget_bytes / buckets;
  constexpr double kInf = std::numeric_limits<double>::infinity();

  std::vector<int> cost(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s) {
    const double q = std::ceil(p.options[s].memory_bytes / quantum - 1e-9);
    cost[s] = q > buckets ? buckets + 1 : static_cast<int>(std::max(0.0, q));
  }
  const int width = buckets + 1;
  const auto at = [&](int v, int s) { return static_cast<std::size_t>(v) * n + s; };
  std::vector<double> f(static_cast<std::size_t>(width) * n, kInf), next(f.size());
  std::vector<std::vector<int>> from(static_cast<std::size_t>(p.layers), std::vector<int>(f.size(), -1));
  for (int s = 0; s < n; ++s)
    if (cost[s] <= buckets) f[at(cost[s], s)] = p.options[s].time;

  // best_into[v][layout]: the cheapest way to have used v quanta and arrive in `layout`, and its option.
  std::vector<double> best_into(static_cast<std::size_t>(width) * layouts);
  std::vector<int> best_from(best_into.size());
  for (int layer = 1; layer < p.layers; ++layer) {
    std::fill(best_into.begin(), best_into.end(), kInf);
    std::fill(best_from.begin(), best_from.end(), -1);
    for (int v = 0; v < width; ++v)
      for (int s = 0; s < n; ++s) {
        const double value = f[at(v, s)];
        if (value == kInf) continue;
        const int previous_layout = p.options[s].layout;
        for (int l = 0; l < layouts; ++l) {
          const double total = value + p.relayout_time[previous_layout][l];
          const std::size_t k = static_cast<std::size_t>(v) * layouts + l;
          if (total < best_into[k]) best_into[k] = total, best_from[k] = s;
        }
      }
    std::fill(next.begin(), next.end(), kInf);
    std::vector<int>& back = from[layer];
    for (int v = 0; v < width; ++v)
      for (int s = 0; s < n; ++s) {
        const int before = v - cost[s];
        if (before < 0) continue;
        const std::size_t k = static_cast<std::size_t>(before) * layouts + p.options[s].layout;
        if (best_into[k] == kInf) continue;
        next[at(v, s)] = best_into[k] + p.options[s].time;
        back[at(v, s)] = best_from[k];
      }
    f.swap(next);
  }

  double best = kInf;
  int best_v = -1, best_s = -1;
  for (int v = 0; v < width; ++v)
    for (int s = 0; s < n; ++s)
      if (f[at(v, s)] < best) best = f[at(v, s)], best_v = v, best_s = s;
  if (best_s < 0) return solution;

  solution.feasible = true;
  solution.time = best;
  solution.choice.assign(static_cast<std::size_t>(p.layers), -1);
  int v = best_v, s = best_s;
  for (int layer = p.layers - 1; layer >= 0; --layer) {
    solution.choice[layer] = s;
    solution.memory_bytes += p.options[s].memory_bytes;
    if (layer == 0) break;
    const int previous = from[layer][at(v, s)];
    v -= cost[s];
    s = previous;
  }
  return solution;
}

std::vector<int> memory_balanced_split(int layers, const std::vector<double>& fixed_bytes,
                                       const std::vector<double>& per_layer_bytes) {
  const int stages = static_cast<int>(fixed_bytes.size());
  std::vector<int> split(static_cast<std::size_t>(stages), 1);
  for (int placed = stages; placed < layers; ++placed) {
    int chosen = 0;
    double lowest = std::numeric_limits<double>::infinity();
    for (int i = 0; i < stages; ++i) {
      const double peak = fixed_bytes[i] + (split[i] + 1) * per_layer_bytes[i];
      if (peak < lowest) lowest = peak, chosen = i;
    }
    ++split[chosen];
  }
  return split;
}

}  // namespace twin
