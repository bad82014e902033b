// One lowering at m micro-batches (m = the pipeline depth, the fewest every schedule takes) gives each class's
// compute per m micro-batches and per iteration; the strategy's count is a multiple of m or the whole graph is
// lowered instead.
#include "strategies/lower_bound.hpp"

#include <algorithm>
#include <vector>

#include "sim/flat_graph.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"

namespace twin {
namespace {

std::vector<sim::ComputeBusy> busy_at(const Scenario& scenario, Strategy strategy, int micro_batches,
                                      const Profile& profile, sim::PriceCache* prices) {
  strategy.num_micro_batches = micro_batches;
  return sim::compute_busy(lower_to_op_graphs(scenario, strategy, profile), scenario.cluster, profile, prices);
}

TimeNs busiest(const std::vector<sim::ComputeBusy>& busy, std::int64_t other_scale) {
  TimeNs bound = 0;
  for (const sim::ComputeBusy& b : busy) bound = std::max(bound, b.optimizer_ns + b.other_ns * other_scale);
  return bound;
}

}  // namespace

TimeNs compute_lower_bound_full_ns(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                   sim::PriceCache* prices) {
  return busiest(busy_at(scenario, strategy, strategy.num_micro_batches, profile, prices), 1);
}

TimeNs compute_lower_bound_ns(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                              sim::PriceCache* prices) {
  const int m = std::max(1, strategy.pipeline_model_parallel_size);
  const int total = strategy.num_micro_batches;
  Strategy fewest = strategy;
  fewest.num_micro_batches = m;
  if (total <= m || total % m != 0 || invalid_reason(scenario, fewest))
    return compute_lower_bound_full_ns(scenario, strategy, profile, prices);
  return busiest(busy_at(scenario, strategy, m, profile, prices), total / m);
}

}  // namespace twin
