// Knapsack over layers: memory quantised so the table stays small, rounded up per option so that a
// solution the table accepts never exceeds the budget. Back-pointers per (layer, memory).
#include "strategies/per_layer/per_layer_dp.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace twin {

DpSolution choose_layer_options(const DpProblem& p) {
  DpSolution solution;
  const int n = static_cast<int>(p.options.size());
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
  // f[v]: the least time of the layers placed so far using exactly v quanta; chosen[layer][v]: the option
  // of that layer on the way to it.
  std::vector<double> f(static_cast<std::size_t>(width), kInf), next(f.size());
  std::vector<std::vector<int>> chosen(static_cast<std::size_t>(p.layers), std::vector<int>(f.size(), -1));
  for (int layer = 0; layer < p.layers; ++layer) {
    std::fill(next.begin(), next.end(), kInf);
    for (int v = 0; v < width; ++v)
      for (int s = 0; s < n; ++s) {
        const int before = v - cost[s];
        if (before < 0) continue;
        const double previous = layer == 0 ? (before == 0 ? 0.0 : kInf) : f[before];
        if (previous == kInf) continue;
        const double total = previous + p.options[s].time;
        if (total < next[v]) next[v] = total, chosen[layer][v] = s;
      }
    f.swap(next);
  }

  double best = kInf;
  int best_v = -1;
  for (int v = 0; v < width; ++v)
    if (f[v] < best) best = f[v], best_v = v;
  if (best_v < 0) return solution;

  solution.feasible = true;
  solution.time = best;
  solution.choice.assign(static_cast<std::size_t>(p.layers), -1);
  for (int layer = p.layers - 1, v = best_v; layer >= 0; --layer) {
    const int s = chosen[layer][v];
    solution.choice[layer] = s;
    solution.memory_bytes += p.options[s].memory_bytes;
    v -= cost[s];
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
