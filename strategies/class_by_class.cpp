// Lowering, flattening and the replay's start in one pass over the classes; the whole path again on a lowering bug.
#include "strategies/class_by_class.hpp"

#include <optional>
#include <stdexcept>

#include "sim/engine.hpp"
#include "sim/flat_graph.hpp"
#include "sim/simulate.hpp"

namespace twin {

namespace {

// The arrays of the iteration this thread flattened last, for its next.
thread_local sim::FlatIteration spare_flat;

}  // namespace

IterationResult simulate_class_by_class(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                        sim::PriceCache* prices, std::vector<StrandPairingSummary>* pairings) {
  const SimOptions options{false, prices};
  try {
    sim::Flattener flattener(scenario.cluster, profile, prices, std::move(spare_flat));
    std::optional<IterationResult> result;
    lower_class_by_class(scenario, strategy, profile, pairings, [&](const IterationGraph& graph, int c) {
      flattener.add(graph, c);
      if (c + 1 < static_cast<int>(graph.classes.size())) return;
      sim::FlatIteration flat = flattener.finish(graph);
      result = sim::run_engine(flat, graph, options);  // while the graph, which names ops in errors, exists
      spare_flat = std::move(flat);
    });
    return std::move(result.value());
  } catch (const std::logic_error&) {
    if (pairings) pairings->clear();
    const IterationGraph graph = lower_to_op_graphs(scenario, strategy, profile, pairings);
    return simulate_iteration(graph, scenario.cluster, profile, options);  // throws it again, naming every op
  }
}

}  // namespace twin
