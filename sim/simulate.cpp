// simulate_iteration: flatten the op graphs once, then replay them in the event loop.
#include "sim/simulate.hpp"

#include "sim/engine.hpp"
#include "sim/flat_graph.hpp"

namespace twin {

IterationResult simulate_iteration(const IterationGraph& graph, const Cluster& cluster, const Profile& profile,
                                   const SimOptions& options) {
  const sim::FlatIteration flat = sim::flatten(graph, cluster, profile, options.prices);
  return sim::run_engine(flat, graph, options);
}

}  // namespace twin
