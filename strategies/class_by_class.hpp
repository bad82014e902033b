// A candidate simulated as a search needs it, its classes lowered and flattened one after another into storage
// that stays in cache (strategies/lowering.hpp, lower_class_by_class; sim/flat_graph.hpp, Flattener), then
// replayed: no graph of the whole iteration is held, so there are no op timings or graph to give back.
#pragma once
#include <vector>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "sim/result.hpp"
#include "strategies/lowering.hpp"

namespace twin {
namespace sim {
class PriceCache;
}

// The same result as simulate_iteration(lower_to_op_graphs(...)), and the same errors: a lowering bug found on the
// way (std::logic_error) is found again by that whole path, whose message names every op.
IterationResult simulate_class_by_class(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                        sim::PriceCache* prices,
                                        std::vector<StrandPairingSummary>* pairings = nullptr);

}  // namespace twin
