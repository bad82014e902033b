// A lower bound on a uniform strategy's iteration time without an event replay, for pruning a search: the
// busiest rank class's compute ops priced one after another, with the communication its compute stream must wait
// through (sim::compute_busy). What a class computes outside the optimizer phase is the same for every
// micro-batch and the sums do not depend on the passes' order, so it is lowered at one micro-batch (in GPipe's
// order, which takes any count of micro-batches and chunks) and scaled to the strategy's count; the optimizer phase runs once. Under
// GPipe, 1F1B and interleaved 1F1B the bound also counts the pipeline's fill and drain through chunk 0 along its
// compute (lower_bound.cpp); where the output layer's weight gradients are deferred to the drain
// (framework.defer_embedding_wgrad_compute), the strategy is bounded as without the deferral, every stage's chain
// followed but the last's.
// Tests check that this equals the bound from the whole graph, and that no simulation beats it, on every shipped
// scenario and published configuration.
#pragma once
#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "core/units.hpp"
#include "sim/price_cache.hpp"

namespace twin {

// `strategy` complete and valid (strategies/validity.hpp). Never more than what simulate_iteration gives for it.
TimeNs compute_lower_bound_ns(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                              sim::PriceCache* prices = nullptr);

// The strategy whose bound compute_lower_bound_ns computes for `strategy`: strategies that differ only in the order
// of their passes (GPipe and 1F1B alike) give the same one, so a search bounds each such group once.
Strategy lower_bound_strategy(const Strategy& strategy);

// The same bound from the whole graph, lowered at the strategy's own micro-batch count: what the scaled one
// must equal (tests), and what is used where the count cannot be scaled.
TimeNs compute_lower_bound_full_ns(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                   sim::PriceCache* prices = nullptr);

}  // namespace twin
