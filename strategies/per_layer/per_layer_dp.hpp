// The per-stage dynamic programme of Galvatron (dynamic_programming.py, dp_core.cpp): one option per
// layer, minimising time under a memory budget, paying a re-layout time between consecutive layers of
// different layouts; and the memory-balanced split of layers over pipeline stages.
#pragma once
#include <vector>

namespace twin {

struct LayerOption {
  double time = 0;          // the layer's cost in the stage's iteration (any unit)
  double memory_bytes = 0;  // what it holds at the stage's peak
  int layout = 0;           // index into DpProblem::relayout_time
};

struct DpProblem {
  int layers = 0;
  std::vector<LayerOption> options;
  std::vector<std::vector<double>> relayout_time;  // [from layout][to layout], 0 on the diagonal
  double budget_bytes = 0;
  int memory_buckets = 512;  // memory is counted in budget / buckets quanta, each option rounded up
};

struct DpSolution {
  bool feasible = false;
  std::vector<int> choice;   // option index per layer
  double time = 0;           // sum of option times and re-layout times
  double memory_bytes = 0;   // sum of option memories (exact, not quantised)
};

// State (layer, memory used in quanta, option of the layer): f = time(option) + min over the previous
// option of (f_prev at memory - memory(option)) + relayout(previous layout, layout). The minimum over
// previous options is taken per previous layout first, so the cost is O(layers * buckets * (options +
// layouts^2)). Ties keep the lower option index, the lower memory. Deterministic.
DpSolution choose_layer_options(const DpProblem& problem);

// Layers per stage (each >= 1, summing to `layers`) minimising the largest fixed_bytes[i] + n_i *
// per_layer_bytes[i]: each layer goes to the stage whose peak after taking it is lowest (ties: the
// earlier stage), which is optimal for this min-max.
std::vector<int> memory_balanced_split(int layers, const std::vector<double>& fixed_bytes,
                                       const std::vector<double>& per_layer_bytes);

}  // namespace twin
