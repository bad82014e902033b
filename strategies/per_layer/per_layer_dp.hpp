// The per-stage dynamic programme of Galvatron (its dynamic_programming.py and csrc/dp_core.cpp): one option per
// layer, minimising time under a memory budget; and the memory-balanced split of layers over pipeline
// stages. Galvatron also pays a re-layout time between layers of different layouts; twin's layouts hold
// the same rows (per_layer.hpp), so a layer's cost does not depend on its neighbours'.
#pragma once
#include <vector>

namespace twin {

struct LayerOption {
  double time = 0;          // the layer's cost in the stage's iteration (any unit)
  double memory_bytes = 0;  // what it holds at the stage's peak
};

struct DpProblem {
  int layers = 0;
  std::vector<LayerOption> options;
  double budget_bytes = 0;
  int memory_buckets = 512;  // memory is counted in budget / buckets quanta, each option rounded up
};

struct DpSolution {
  bool feasible = false;
  std::vector<int> choice;   // option index per layer
  double time = 0;           // sum of option times
  double memory_bytes = 0;   // sum of option memories (exact, not quantised)
};

// State (layers placed, memory used in quanta): f = min over the option of the last layer of
// time(option) + f_prev at (memory - memory(option)); O(layers * buckets * options). Ties keep the lower
// option index, the lower memory. Deterministic.
DpSolution choose_layer_options(const DpProblem& problem);

// Layers per stage (each >= 1, summing to `layers`) minimising the largest fixed_bytes[i] + n_i *
// per_layer_bytes[i]: each layer goes to the stage whose peak after taking it is lowest (ties: the
// earlier stage), which is optimal for this min-max.
std::vector<int> memory_balanced_split(int layers, const std::vector<double>& fixed_bytes,
                                       const std::vector<double>& per_layer_bytes);

}  // namespace twin
