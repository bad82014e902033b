#include "executor/layout_groups.hpp"

#include <map>

namespace twin::exec {

std::vector<Strategy> other_layouts(const PlanGraphs& lowered) {
  const Strategy& home = lowered.parts.front().strategy;
  const int stage_ranks = home.tensor_model_parallel_size * home.context_parallel_size * home.data_parallel_size;
  std::map<int, Strategy> by_size;
  const auto add = [&](int tp) {
    if (tp == home.tensor_model_parallel_size || by_size.count(tp)) return;
    Strategy s = home;
    s.tensor_model_parallel_size = tp;
    s.context_parallel_size = 1;
    s.data_parallel_size = stage_ranks / tp;
    by_size.emplace(tp, s);
  };
  for (const PlanPart& part : lowered.parts)
    for (const UnitExecution& unit : part.layer_units) {
      add(unit.weights.tensor_model_parallel_size);
      add(unit.group);
    }
  std::vector<Strategy> out;
  for (const auto& [size, s] : by_size) out.push_back(s);
  return out;
}

}  // namespace twin::exec
