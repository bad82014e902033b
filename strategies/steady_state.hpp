// A pipeline's steady state, extrapolated instead of replayed. Under GPipe, 1F1B and interleaved 1F1B an iteration
// is a warm-up, a steady state that repeats per micro-batch (per group of p micro-batches when interleaved) and a
// cool-down; once the schedule has filled, each further micro-batch adds the same time to every class's clock.
// So a strategy with many micro-batches is replayed at two shorter counts, both past the fill (W and 4W, W the
// pipeline depth and at least 2; 2W and 3W when interleaved), and every time of the result is extended along the
// line through them to the strategy's count. Nothing else about the strategy changes: the lowering, pricing and
// engine are the full replay's; only the number of micro-batches replayed differs.
//
// Where it applies: a uniform strategy (no family plan), schedule GPipe, 1F1B or interleaved 1F1B (not double
// strand), ZeRO below 3 (or ZeRO-3 as DeepSpeed drives it, framework.zero_implementation), on nodes with a NIC per
// GPU (or none), whose two replays together hold at most 2/3 of its micro-batches (m >= 7.5 W); where the output
// layer's weight gradients are deferred (framework.defer_embedding_wgrad_compute), both replays start a pipeline
// round past the deferral limit, and with every micro-batch deferred it does not apply;
// elsewhere the whole iteration is replayed. Op timings (traces, best.json) always come from a full replay. A
// strategy whose whole graph would exceed the op limit (strategies/validity.hpp) is valid where it applies: its
// graph is never held whole.
//
// Tolerance, checked against the full replay on every candidate it applies to in every shipped scenario and every
// published configuration (tests/strategies/steady_state_test.cpp, tests/validation/steady_state_published_test.cpp):
// the iteration within kSteadyStateIterationTolerance, each part of the breakdown within
// kSteadyStateBreakdownTolerance of the iteration. Not exact: the engine's fluid flows make some pipelines only
// nearly periodic (a deep 1F1B pipeline's end lies up to about 0.07 of a micro-batch off the line: why 1F1B's
// replays lie 3W apart, strategies/steady_state.cpp).
#pragma once
#include <optional>

#include "core/scenario.hpp"
#include "core/strategy.hpp"
#include "cost/profile.hpp"
#include "sim/price_cache.hpp"
#include "sim/result.hpp"

namespace twin {

inline constexpr double kSteadyStateIterationTolerance = 1e-3;
inline constexpr double kSteadyStateBreakdownTolerance = 5e-3;

// The replays (sim/result.hpp: two micro-batch counts) that stand for `strategy` (complete and valid), or none where the whole iteration must be replayed.
std::optional<SteadyStateReplay> steady_state_replay(const Scenario& scenario, const Strategy& strategy);
// The counts the schedule rule above picks for `strategy` (complete), before the shorter strategies are checked
// for validity; none where it does not apply.
std::optional<SteadyStateReplay> steady_state_counts(const Scenario& scenario, const Strategy& strategy);

// Every time of `first` and `second` (replays at the counts `replay` names) extended linearly to `micro_batches`:
// each class's finish, breakdown and communication time; the critical class is the one finishing last; `events`
// counts what the two replays processed; `steady_state` is left unset. No op timings. Throws std::range_error past the engine's horizon.
IterationResult extrapolate_steady_state(const IterationResult& first, const IterationResult& second,
                                         const SteadyStateReplay& replay, int micro_batches);

// Lowers and simulates `strategy` at the two counts and extrapolates to its own (`steady_state` says so).
IterationResult simulate_steady_state(const Scenario& scenario, const Strategy& strategy, const Profile& profile,
                                      const SteadyStateReplay& replay, sim::PriceCache* prices = nullptr);

}  // namespace twin
