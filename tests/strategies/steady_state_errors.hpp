// The steady-state extrapolation of one candidate against its whole replay (strategies/steady_state.hpp), as
// fractions of the whole replay's iteration: shared by the shipped-scenario and published-configuration tests.
#pragma once
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "strategies/search.hpp"
#include "strategies/steady_state.hpp"
#include "strategies/validity.hpp"

namespace twin::testing {

struct SteadyStateErrors {
  double iteration = 0;
  double worst_part = 0;      // the largest of compute, exposed communication, bubble and optimizer
  bool parts_add_up = false;  // the extrapolated parts sum to its iteration, as the engine's do
};

inline SteadyStateErrors steady_state_errors(const Scenario& scenario, const Profile& profile,
                                             const Strategy& strategy, const SteadyStateReplay& replay) {
  const IterationResult whole = evaluate(scenario, profile, strategy, false).result;
  const IterationResult steady = simulate_steady_state(scenario, strategy, profile, replay);
  const double iteration = static_cast<double>(whole.iteration_ns);
  const auto error = [&](TimeNs a, TimeNs b) { return std::fabs(static_cast<double>(a - b)) / iteration; };
  const TimeBreakdown& a = steady.breakdown;
  const TimeBreakdown& b = whole.breakdown;
  SteadyStateErrors e;
  e.iteration = error(steady.iteration_ns, whole.iteration_ns);
  e.worst_part = std::max({error(a.compute_ns, b.compute_ns),
                           error(a.exposed_communication_ns, b.exposed_communication_ns),
                           error(a.bubble_ns, b.bubble_ns), error(a.optimizer_ns, b.optimizer_ns)});
  e.parts_add_up = a.compute_ns + a.exposed_communication_ns + a.bubble_ns + a.optimizer_ns == steady.iteration_ns;
  return e;
}

// What the checks of every candidate found: how many, of 32 stages or more, and the worst errors.
struct SteadyStateTotals {
  int checked = 0;
  int deep = 0;
  double worst = 0;
  double worst_part = 0;
};

// Every feasible candidate of `scenario` that the extrapolation applies to and that can be replayed whole, against
// that replay: each within the stated tolerances (test expectations), added to `totals`.
inline void expect_steady_state_within_tolerance(const Scenario& scenario, const Profile& profile,
                                                 SteadyStateTotals& totals) {
  for (const Candidate& c : enumerate_candidates(scenario)) {
    if (!c.feasible) continue;
    const std::optional<SteadyStateReplay> replay = steady_state_replay(scenario, c.strategy);
    if (!replay || whole_graph_too_large(scenario, c.strategy)) continue;  // no whole replay to compare with
    const SteadyStateErrors e = steady_state_errors(scenario, profile, c.strategy, *replay);
    EXPECT_LE(e.iteration, kSteadyStateIterationTolerance) << c.key();
    EXPECT_LE(e.worst_part, kSteadyStateBreakdownTolerance) << c.key();
    EXPECT_TRUE(e.parts_add_up) << c.key();
    totals.worst = std::max(totals.worst, e.iteration);
    totals.worst_part = std::max(totals.worst_part, e.worst_part);
    ++totals.checked;
    if (c.strategy.pipeline_model_parallel_size >= 32) ++totals.deep;
  }
}

}  // namespace twin::testing
